package rootdisk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

var testBaseKey = bytes.Repeat([]byte{0x5a}, 32)

// baseServer is one server of a fleet: its own data directory with the
// image content imported, and the fleet's key.
func baseServer(t *testing.T, key []byte, content []byte) (*Manager, inventory.Image) {
	t.Helper()
	data := t.TempDir()
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	sum, size, err := blobs.Import(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Data: data, Blobs: blobs, BaseKey: key, ImageLinger: -1,
		Leases: leases{"52:54:00:00:00:02": net.IPv4(10, 0, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetAddr("10.0.0.1", 10809)
	return m, inventory.Image{Name: "debian", SHA256: sum, Size: size}
}

var baseContent = bytes.Repeat([]byte("base"), 64<<10)

func TestParseBaseExportName(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	tag := strings.Repeat("0f", 16)
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"ok", "r-52-54-00-12-34-56-" + sha + "-" + tag, true},
		{"machine export", "m-52-54-00-12-34-56-" + tag, false},
		{"short tag", "r-52-54-00-12-34-56-" + sha + "-" + tag[1:], false},
		{"long tag", "r-52-54-00-12-34-56-" + sha + "-" + tag + "0", false},
		{"upper-case sha", "r-52-54-00-12-34-56-" + strings.ToUpper(sha) + "-" + tag, false},
		{"colons in mac", "r-52:54:00:12:34:56-" + sha + "-" + tag, false},
		{"not a mac", "r-52-54-00-12-34-zz-" + sha + "-" + tag, false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mac, gotSHA, gotTag, err := ParseBaseExportName(tt.in)
			if !tt.ok {
				if !errors.Is(err, ErrBadName) {
					t.Fatalf("got %v %q %q %v, want ErrBadName", mac, gotSHA, gotTag, err)
				}
				return
			}
			if err != nil || mac.String() != "52:54:00:12:34:56" || gotSHA != sha || gotTag != tag {
				t.Fatalf("got %v %q %q %v", mac, gotSHA, gotTag, err)
			}
		})
	}
	mac := mustMAC("52:54:00:12:34:56")
	name := BaseExportName(testBaseKey, mac, sha)
	if got := MachineOf(name); got.String() != mac.String() {
		t.Fatalf("MachineOf(%q) = %v, want %v", name, got, mac)
	}
	if label := LogLabel(name); strings.Contains(label, name[len(name)-baseTagLen:]) {
		t.Fatalf("LogLabel(%q) = %q shows the tag", name, label)
	}
}

// issueBase issues a client-ram boot of mac on a and returns the export.
func issueBase(t *testing.T, m *Manager, img inventory.Image, mac, overlay string) string {
	t.Helper()
	b, err := m.IssueBoot(mustMAC(mac), img, overlay)
	if err != nil {
		t.Fatal(err)
	}
	if b.Args != "bootfleet.overlay="+overlay {
		t.Fatalf("Args = %q, want bootfleet.overlay=%s", b.Args, overlay)
	}
	export, ok := strings.CutPrefix(b.Root, "nbd:10.0.0.1:10809:")
	if !ok || !strings.HasPrefix(export, basePrefix) {
		t.Fatalf("Root = %q, want nbd:10.0.0.1:10809:r-...", b.Root)
	}
	return export
}

func TestBaseExportAnyServer(t *testing.T) {
	a, img := baseServer(t, testBaseKey, baseContent)
	b, _ := baseServer(t, testBaseKey, baseContent)
	other, _ := baseServer(t, bytes.Repeat([]byte{1}, 32), baseContent)
	lacking, _ := baseServer(t, testBaseKey, []byte("other content, not the image"))
	pc1 := issueBase(t, a, img, "52:54:00:00:00:01", "client-ram")
	pc2 := issueBase(t, a, img, "52:54:00:00:00:02", "client-disk")
	// Content the server holds but never gave this machine.
	secretSHA := strings.Repeat("cd", 32)
	forged := BaseExportName(bytes.Repeat([]byte{7}, 32), mustMAC("52:54:00:00:00:01"), img.SHA256)
	tests := []struct {
		name   string
		m      *Manager
		export string
		remote string
		want   error
	}{
		{"the server that issued it", a, pc1, "10.0.0.9", nil},
		{"another server of the fleet", b, pc1, "10.0.0.9", nil},
		{"from the machine's lease", b, pc2, "10.0.0.2", nil},
		{"leased machine from another address", b, pc2, "10.0.0.9", nbd.ErrRefused},
		{"another machine's name", b, strings.Replace(pc2, "r-52-54-00-00-00-02", "r-52-54-00-00-00-01", 1), "10.0.0.9", nbd.ErrRefused},
		{"content never given", b, strings.Replace(pc1, img.SHA256, secretSHA, 1), "10.0.0.9", nbd.ErrRefused},
		{"a tag made with another key", b, forged, "10.0.0.9", nbd.ErrRefused},
		{"a server of another fleet", other, pc1, "10.0.0.9", nbd.ErrRefused},
		{"a server without the content", lacking, pc1, "10.0.0.9", nbd.ErrRefused},
		{"malformed", b, pc1[:len(pc1)-1], "10.0.0.9", nbd.ErrUnknownExport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if e := lookupAndRead(t, tt.m, tt.export, tt.remote, tt.want, baseContent); e != nil && !e.Info().ReadOnly {
				t.Fatal("base export is writable")
			}
		})
	}
}

func TestBaseExportKeepsNoMachineState(t *testing.T) {
	m, img := baseServer(t, testBaseKey, baseContent)
	mac := "52:54:00:00:00:01"
	// An ephemeral boot first: its export and overlay go with the switch.
	eph, err := m.Issue(mustMAC(mac), img, "ephemeral")
	if err != nil {
		t.Fatal(err)
	}
	ephExport := eph[strings.LastIndex(eph, ":")+1:]
	e, err := m.Lookup(ephExport, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	e.(io.Closer).Close()

	export := issueBase(t, m, img, mac, "client-ram")
	if _, err := m.Lookup(ephExport, tcp("10.0.0.9")); !errors.Is(err, nbd.ErrRefused) {
		t.Fatalf("the ephemeral export after a client-ram boot: %v, want refused", err)
	}
	be, err := m.Lookup(export, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if n := m.OpenSessions(); n != 1 {
		t.Errorf("OpenSessions = %d, want 1", n)
	}
	if deleted, err := release(m, img.SHA256); deleted || err != nil {
		t.Errorf("release while a machine reads the content = %v, %v; want kept", deleted, err)
	}
	be.(io.Closer).Close()
	if n := m.OpenSessions(); n != 0 {
		t.Errorf("OpenSessions after close = %d, want 0", n)
	}
	for _, p := range []string{m.OverlayDir(mustMAC(mac)), m.bootPath(mustMAC(mac))} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a client-ram boot: %v, want it gone", filepath.Base(p), err)
		}
	}
}

func TestBaseExportIssueErrors(t *testing.T) {
	m, img := baseServer(t, nil, baseContent)
	if _, err := m.IssueBoot(mustMAC("52:54:00:00:00:01"), img, "client-ram"); err == nil || !strings.Contains(err.Error(), "base key") {
		t.Errorf("client-ram without the fleet key: %v, want an error naming the key", err)
	}
	m, img = baseServer(t, testBaseKey, baseContent)
	img.SHA256 = strings.Repeat("ee", 32)
	if _, err := m.IssueBoot(mustMAC("52:54:00:00:00:01"), img, "client-disk"); err == nil || !strings.Contains(err.Error(), "import the image") {
		t.Errorf("client-disk of missing content: %v, want an error saying to import it", err)
	}
}

// TestBaseExportRefusesWritesOverNBD runs the NBD server on the base
// export: the handshake advertises it read-only, a WRITE gets EPERM, and
// the session carries on serving reads.
func TestBaseExportRefusesWritesOverNBD(t *testing.T) {
	m, img := baseServer(t, testBaseKey, baseContent)
	export := issueBase(t, m, img, "52:54:00:00:00:01", "client-ram")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nbd.NewServer(m, nbd.Config{}).Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	info, err := nbd.ClientHandshake(c, export)
	if err != nil {
		t.Fatal(err)
	}
	if info.Flags&nbd.FlagReadOnly == 0 || info.Size != uint64(len(baseContent)) {
		t.Fatalf("handshake: flags %#x size %d, want read-only and %d bytes", uint16(info.Flags), info.Size, len(baseContent))
	}
	req := func(typ nbd.Command, handle uint64, payload []byte, n uint32) nbd.Errno {
		t.Helper()
		b := nbd.AppendRequest(nil, nbd.Request{Type: typ, Handle: handle, Offset: 4096, Length: n})
		if _, err := c.Write(append(b, payload...)); err != nil {
			t.Fatal(err)
		}
		hdr := make([]byte, nbd.SimpleReplyLen)
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatalf("reply to %v: %v (did the server drop the session?)", typ, err)
		}
		h, errno, err := nbd.ParseSimpleReply(hdr)
		if err != nil || h != handle {
			t.Fatalf("reply to %v: handle %d, %v; want handle %d", typ, h, err, handle)
		}
		if typ == nbd.CmdRead && errno == 0 {
			got := make([]byte, n)
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, baseContent[4096:4096+n]) {
				t.Fatalf("read after the refused write: %v, data equal %v", err, bytes.Equal(got, baseContent[4096:4096+n]))
			}
		}
		return errno
	}
	if e := req(nbd.CmdWrite, 1, bytes.Repeat([]byte{0xff}, 512), 512); e != nbd.EPERM {
		t.Fatalf("WRITE to the base export: errno %v, want EPERM", e)
	}
	if e := req(nbd.CmdRead, 2, nil, 512); e != 0 {
		t.Fatalf("READ after the refused WRITE: errno %v, want success", e)
	}
}

// lookupAndRead looks export up from remote and, unless want is an error
// it must fail with, reads a block and compares it with content. It
// returns the export, closed, or nil.
func lookupAndRead(t *testing.T, m *Manager, export, remote string, want error, content []byte) nbd.Export {
	t.Helper()
	e, err := m.Lookup(export, tcp(remote))
	if want != nil {
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.(io.Closer).Close()
	buf := make([]byte, 4096)
	if err := readExport(e, buf, 8192); err != nil || !bytes.Equal(buf, content[8192:12288]) {
		t.Fatalf("read %v, data equal %v", err, bytes.Equal(buf, content[8192:12288]))
	}
	return e
}

// readExport fills p from off through the export's Store, as the NBD
// server's workers do.
func readExport(e nbd.Export, p []byte, off int64) error {
	s, err := e.ReadSpan(p, off)
	if err != nil {
		return err
	}
	if len(s.Bytes) != len(p) {
		return fmt.Errorf("ReadSpan of %d bytes at %d returned %d bytes, want %d", len(p), off, len(s.Bytes), len(p))
	}
	copy(p, s.Bytes)
	return nil
}
