package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// serverSpec says how to run one server. Each peer is run the way its
// Debian package would run it, with only the limits raised that would
// otherwise refuse 200 concurrent clients (noted in the report).
type serverSpec struct {
	name string
	tftp bool // takes part in the TFTP cases
	http bool // takes part in the HTTP case
	bin  string
	// argv builds the command line for topology t; it may write config files into dir.
	argv func(b *bench, t *harness.Net, dir string) ([]string, error)
	// urlPath maps a file name to its HTTP path.
	urlPath func(name string) string
	version func(bin string) string
	note    string
}

func specs(o *options) []*serverSpec {
	return []*serverSpec{
		{name: "bootfleet", tftp: true, http: true, bin: o.bootfleet, argv: bootfleetArgv,
			urlPath: func(n string) string { return "/files/" + n },
			version: fileVersion,
			note:    "dhcp.mode off, defaults otherwise (max_window 64, cache_mb 512, blksize clamped to the MTU)"},
		{name: "dnsmasq", tftp: true, bin: "dnsmasq", argv: dnsmasqArgv, version: firstLine("--version"),
			note: "--tftp-max raised from its default of 50 so that 200 clients are served at all"},
		{name: "tftp-hpa", tftp: true, bin: o.hpa, argv: hpaArgv, version: firstLine("-V"),
			note: "forks one process per transfer; defaults otherwise"},
		{name: "atftpd", tftp: true, bin: "atftpd", argv: atftpdArgv, version: firstLine("--version"),
			note: "--maxthread raised from 100; --retry-timeout lowered from 5 s to the 1 s dnsmasq and tftp-hpa use"},
		{name: "nginx", http: true, bin: "nginx", argv: nginxArgv, version: firstLine("-v"),
			urlPath: func(n string) string { return "/" + n },
			note:    "sendfile on, tcp_nopush on, keep-alive, access_log off, worker_processes auto"},
	}
}

func bootfleetArgv(b *bench, t *harness.Net, dir string) ([]string, error) {
	// bootfleet checks its iPXE binaries at start, and refuses Debian's
	// ipxe.efi, an absolute symlink to /boot. The bench serves no iPXE, so a
	// private copy of the resolved files (or a stand-in) is enough.
	ipxeDir := filepath.Join(dir, "ipxe")
	if err := os.MkdirAll(ipxeDir, 0o755); err != nil {
		return nil, err
	}
	for _, n := range []string{"ipxe.efi", "undionly.kpxe"} {
		data, err := os.ReadFile(filepath.Join("/usr/lib/ipxe", n))
		if err != nil {
			data = []byte("bench stand-in for " + n)
		}
		if err := os.WriteFile(filepath.Join(ipxeDir, n), data, 0o644); err != nil {
			return nil, err
		}
	}
	cfg := filepath.Join(dir, "bootfleet-"+t.Name+".yaml")
	y := fmt.Sprintf(`# written by bench: TFTP and HTTP only
data: %s
server_ip: %s
dhcp:
  mode: "off"
tftp:
  listen: "%s:69"
  root: %s
  max_per_client: 1024   # every bench client shares one address
http:
  listen: "%s:8080"
ipxe:
  dir: %s
log:
  level: warn
`, filepath.Join(dir, "bootfleet-data"), t.ServerIP, t.ServerIP, b.root, t.ServerIP, ipxeDir)
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		return nil, err
	}
	return []string{b.opt.bootfleet, "serve", "--config", cfg}, nil
}

func dnsmasqArgv(b *bench, t *harness.Net, dir string) ([]string, error) {
	return []string{"dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--port=0", "--enable-tftp", "--tftp-root=" + b.root, "--tftp-max=1000", "--user=root",
		"--pid-file=", "--log-facility=" + filepath.Join(dir, "dnsmasq-"+t.Name+".log")}, nil
}

func hpaArgv(b *bench, t *harness.Net, dir string) ([]string, error) {
	// No -a: in.tftpd resolves it with AI_ADDRCONFIG, which fails for
	// 127.0.0.1 in a namespace that has only lo (exit 66, nothing logged).
	return []string{b.opt.hpa, "-L", "-u", "root", "-s", b.root}, nil
}

func atftpdArgv(b *bench, t *harness.Net, dir string) ([]string, error) {
	return []string{"atftpd", "--daemon", "--no-fork", "--user", "root", "--group", "root",
		"--port", "69", "--bind-address", t.ServerIP, "--maxthread", "1000", "--retry-timeout", "1",
		"--logfile", filepath.Join(dir, "atftpd-"+t.Name+".log"), b.root}, nil
}

func nginxArgv(b *bench, t *harness.Net, dir string) ([]string, error) {
	prefix := filepath.Join(dir, "nginx-"+t.Name)
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	conf := harness.NginxConf(prefix, t.ServerIP+":8080", b.root)
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return []string{"nginx", "-p", prefix, "-e", filepath.Join(prefix, "error.log"), "-c", path}, nil
}

func firstLine(flag string) func(string) string {
	return func(bin string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, bin, flag).CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return strings.TrimSpace(line)
	}
}

// fileVersion identifies a binary with no release version by content and date.
func fileVersion(bin string) string {
	f, err := os.Open(bin)
	if err != nil {
		return "missing: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err.Error()
	}
	st, _ := f.Stat()
	return fmt.Sprintf("%s built %s, sha256 %s", bin, st.ModTime().UTC().Format(time.RFC3339), hex.EncodeToString(h.Sum(nil))[:12])
}

// server is one running server process (and its children).
type server struct {
	*harness.Proc
	spec *serverSpec
	topo *harness.Net
}

// start runs spec in t and waits until it answers: a TFTP probe fetch or an
// HTTP request for the probe file.
func (b *bench) start(ctx context.Context, spec *serverSpec, t *harness.Net, asHTTP bool) (*server, error) {
	inner, err := spec.argv(b, t, b.work)
	if err != nil {
		return nil, fmt.Errorf("%s: prepare: %w", spec.name, err)
	}
	p, err := harness.Start(spec.name+"-"+t.Name, t.ServerNS, filepath.Join(b.work, spec.name+"-"+t.Name+".out"), nil, inner...)
	if err != nil {
		return nil, err
	}
	s := &server{Proc: p, spec: spec, topo: t}
	err = p.WaitReady(8*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if asHTTP {
			return b.httpProbe(pctx, s)
		}
		_, err := b.probe(pctx, s, 512, 1)
		return err
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return s, nil
}

var errNoOACK = errors.New("no OACK in atftp's trace")
