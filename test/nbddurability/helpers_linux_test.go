package nbddurability

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// server is one `bootfleet serve` child; start may be called again after
// kill9, on the same data directory and ports.
type server struct {
	t              *testing.T
	bin, dir, data string
	cfg, http, nbd string
	n              int
	*testutil.Process
}

func newServer(t *testing.T, dir string) *server {
	t.Helper()
	s := &server{t: t, bin: testutil.BootfleetBinary(t), dir: dir, data: filepath.Join(dir, "data"),
		http: testutil.FreeAddr(t), nbd: testutil.FreeAddr(t)}
	ipxe := filepath.Join(dir, "ipxe")
	os.Mkdir(ipxe, 0o755)
	for _, f := range []string{"ipxe.efi", "undionly.kpxe", "vmlinuz"} {
		if err := os.WriteFile(filepath.Join(ipxe, f), []byte("placeholder"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	y := fmt.Sprintf(`server_ip: 127.0.0.1
data: %s
dhcp: {mode: "off"}
tftp: {listen: "off"}
http: {listen: "%s"}
nbd: {listen: "%s"}
ipxe: {dir: %s}
log: {level: info}
profiles:
  durable:
    kernel: %s
    root: {image: durable, overlay: persistent}
`, s.data, s.http, s.nbd, ipxe, filepath.Join(ipxe, "vmlinuz"))
	s.cfg = filepath.Join(dir, "bootfleet.yaml")
	if err := os.WriteFile(s.cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *server) start() {
	t := s.t
	t.Helper()
	s.n++
	s.Process = testutil.StartProcess(t, filepath.Join(s.dir, fmt.Sprintf("serve-%d.log", s.n)), s.bin, "serve", "--config", s.cfg)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + s.http + "/api/v1/openapi.json")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-s.Exited:
			t.Fatalf("bootfleet (lifetime %d) exited at start:\n%s", s.n, s.LogTail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("bootfleet (lifetime %d) did not answer HTTP in 20 s:\n%s", s.n, s.LogTail(40))
}

func (s *server) alive() bool {
	select {
	case <-s.Exited:
		return false
	default:
	}
	resp, err := http.Get("http://" + s.http + "/api/v1/openapi.json")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// cli runs a bootfleet client command against the server.
func (s *server) cli(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append(args, "--server", "http://"+s.http, "--data", s.data)
	out, err := exec.CommandContext(ctx, s.bin, args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("bootfleet %s: %v\n%s\n%s", strings.Join(args, " "), err, out, s.LogTail(40))
	}
	return string(out)
}

// importImage imports imageSize random bytes as image name and returns them.
func (s *server) importImage(name string) []byte {
	s.t.Helper()
	img := make([]byte, imageSize)
	rand.Read(img)
	p := filepath.Join(s.dir, name+".img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.cli("image", "import", name, p)
	return img
}

var rootArgRE = regexp.MustCompile(`bootfleet\.root=nbd:([0-9.]+):([0-9]+):(m-[0-9a-f-]+)`)

// export renders mac's script, as a boot would, and returns the nbd:// URI
// of the export it names.
func (s *server) export(mac string) string {
	s.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + s.http + "/ipxe/" + strings.ReplaceAll(mac, ":", "-"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := rootArgRE.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		s.t.Fatalf("GET /ipxe/%s = %d, want a script with bootfleet.root=nbd:IP:PORT:EXPORT:\n%s\n%s", mac, resp.StatusCode, b, s.LogTail(40))
	}
	return fmt.Sprintf("nbd://%s:%s/%s", m[1], m[2], m[3])
}

// readAll reads mac's whole disk through a fresh export with nbdcopy.
func (s *server) readAll(mac string) []byte {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nbdcopy", s.export(mac), "-")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("nbdcopy of %s's export: %v\n%s\n%s", mac, err, stderr.Bytes(), s.LogTail(40))
	}
	return out
}

// qemuIO is an interactive qemu-io session on one NBD export: the session
// stays open between commands, as a booted machine's would.
type qemuIO struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	chunks chan string
	done   chan struct{}
}

// prompt ends the output of every command. qemu-io reads stdin through
// stdio but polls the descriptor, so it must get one command per write
// and its prompt back before the next.
const prompt = "qemu-io> "

func openQemuIO(t *testing.T, uri string) *qemuIO {
	t.Helper()
	// writeback: plain writes go without FUA, so FUA and FLUSH mean
	// something (qemu-io's default, writethrough, adds FUA to every write).
	cmd := exec.Command("qemu-io", "-t", "writeback", "-f", "raw", uri)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start qemu-io: %v", err)
	}
	q := &qemuIO{t: t, cmd: cmd, in: in, chunks: make(chan string, 64), done: make(chan struct{})}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := out.Read(b)
			if n > 0 {
				q.chunks <- string(b[:n])
			}
			if err != nil {
				close(q.chunks)
				return
			}
		}
	}()
	go func() { cmd.Wait(); close(q.done) }()
	t.Cleanup(q.close)
	if out := q.output("open " + uri); strings.Contains(out, "can't open") {
		t.Fatalf("qemu-io %s: %s", uri, out)
	}
	return q
}

// run sends one command and returns its output.
func (q *qemuIO) run(c string) string {
	q.t.Helper()
	if _, err := io.WriteString(q.in, c+"\n"); err != nil {
		q.t.Fatalf("qemu-io %q: %v", c, err)
	}
	return q.output(c)
}

// output collects output up to the next prompt.
func (q *qemuIO) output(c string) string {
	q.t.Helper()
	var out strings.Builder
	timeout := time.After(60 * time.Second)
	for {
		select {
		case b, ok := <-q.chunks:
			if !ok {
				q.t.Fatalf("qemu-io exited during %q:\n%s", c, out.String())
			}
			out.WriteString(b)
			if strings.HasSuffix(out.String(), prompt) {
				return strings.TrimSuffix(out.String(), prompt)
			}
		case <-timeout:
			q.t.Fatalf("qemu-io %q: no prompt in 60 s:\n%s", c, out.String())
		}
	}
}

// mustRun runs c and fails on any output naming a failure.
func (q *qemuIO) mustRun(c string) string {
	q.t.Helper()
	out := q.run(c)
	if strings.Contains(out, "failed") || strings.Contains(out, "can't open") || strings.Contains(out, "error") {
		q.t.Fatalf("qemu-io %q: %s", c, out)
	}
	return out
}

// mustWrite writes r with extra write flags (e.g. "-f" for FUA).
func (q *qemuIO) mustWrite(flags string, r region) {
	q.t.Helper()
	out := q.mustRun(fmt.Sprintf("write %s -P 0x%02x %d %d", flags, r.pat, r.off, r.n))
	if !strings.Contains(out, fmt.Sprintf("wrote %d/%d bytes", r.n, r.n)) {
		q.t.Fatalf("qemu-io write %+v: %s", r, out)
	}
}

// close ends the session; after a server kill qemu-io may hang on its
// final flush, so it is killed if it does not quit in time.
func (q *qemuIO) close() {
	io.WriteString(q.in, "quit\n")
	q.in.Close()
	select {
	case <-q.done:
	case <-time.After(5 * time.Second):
		q.cmd.Process.Kill()
		<-q.done
	}
}

// mountTmpfs mounts a tmpfs of size at dir until the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "bf-nbdfull", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s; lazy unmount", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

func prereqs(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root: the full-disk test mounts a tmpfs"
	}
	for _, tool := range []string{"qemu-io", "nbdcopy", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil && why == "" {
			why = tool + " not found in PATH (scripts/deps.sh installs qemu-utils and libnbd-bin)"
		}
	}
	if why == "" {
		return
	}
	testutil.SkipUnlessCI(t, why)
}
