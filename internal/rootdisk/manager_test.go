package rootdisk

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

func TestParseExportName(t *testing.T) {
	secret := strings.Repeat("0123456789abcdef", 2)
	tests := []struct {
		name, in, mac, secret string
	}{
		{"ok", "m-52-54-00-12-34-56-" + secret, "52:54:00:12:34:56", secret},
		{"shortest secret", "m-52-54-00-12-34-56-0123456789abcdef", "52:54:00:12:34:56", "0123456789abcdef"},
		{"no prefix", "52-54-00-12-34-56-" + secret, "", ""},
		{"colons", "m-52:54:00:12:34:56-" + secret, "", ""},
		{"secret too short", "m-52-54-00-12-34-56-0123456789abcde", "", ""},
		{"secret too long", "m-52-54-00-12-34-56-" + strings.Repeat("a", 65), "", ""},
		{"upper-case secret", "m-52-54-00-12-34-56-" + strings.ToUpper(secret), "", ""},
		{"not a mac", "m-52-54-00-12-34-zz-" + secret, "", ""},
		{"empty", "", "", ""},
		{"image name", "debian", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mac, s, err := ParseExportName(tt.in)
			if tt.mac == "" {
				if !errors.Is(err, ErrBadName) {
					t.Fatalf("got %v %q %v, want ErrBadName", mac, s, err)
				}
				return
			}
			if err != nil || mac.String() != tt.mac || s != tt.secret {
				t.Fatalf("got %v %q %v, want %s %q", mac, s, err, tt.mac, tt.secret)
			}
		})
	}
	hw, _ := net.ParseMAC("52:54:00:12:34:56")
	if got, _, err := ParseExportName(ExportName(hw, newSecret())); err != nil || got.String() != hw.String() {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

type leases map[string]net.IP

func (l leases) LeaseIP(mac net.HardwareAddr) (net.IP, bool) {
	ip, ok := l[mac.String()]
	return ip, ok
}

type fixture struct {
	m     *Manager
	img   inventory.Image
	bytes []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return fixtureIn(t, t.TempDir())
}

// fixtureIn is newFixture with its data directory in data.
func fixtureIn(t *testing.T, data string) *fixture {
	t.Helper()
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("base"), 64<<10) // 256 KiB
	sum, size, err := blobs.Import(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Data: data, Blobs: blobs, BlockSize: 4096,
		Leases: leases{"52:54:00:00:00:02": net.IPv4(10, 0, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetAddr("10.0.0.1", 10809)
	return &fixture{m: m, img: inventory.Image{Name: "debian", SHA256: sum, Size: size}, bytes: content}
}

func mustMAC(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

func tcp(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }

// issue returns the export name of a new boot of mac.
func (f *fixture) issue(t *testing.T, mac, overlay string) string {
	t.Helper()
	arg, err := f.m.Issue(mustMAC(mac), f.img, overlay)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "nbd:10.0.0.1:10809:"
	if !strings.HasPrefix(arg, prefix) {
		t.Fatalf("root argument %q, want it to start with %q", arg, prefix)
	}
	return strings.TrimPrefix(arg, prefix)
}

// wrongSecret changes the last hex digit of an export name's secret.
func wrongSecret(export string) string {
	last := "0"
	if strings.HasSuffix(export, "0") {
		last = "1"
	}
	return export[:len(export)-1] + last
}

func TestLookupAccess(t *testing.T) {
	f := newFixture(t)
	pc1 := f.issue(t, "52:54:00:00:00:01", "")
	pc2 := f.issue(t, "52:54:00:00:00:02", "")
	_, sec2, _ := ParseExportName(pc2)
	stale := f.issue(t, "52:54:00:00:00:03", "")
	f.issue(t, "52:54:00:00:00:03", "") // the next render voids stale
	tests := []struct {
		name, export, remote string
		want                 error
	}{
		{"own export", pc1, "10.0.0.9", nil},
		{"own export from the leased address", pc2, "10.0.0.2", nil},
		{"leased machine from another address", pc2, "10.0.0.9", nbd.ErrRefused},
		{"wrong secret", wrongSecret(pc1), "10.0.0.9", nbd.ErrRefused},
		{"another machine's secret", "m-52-54-00-00-00-01-" + sec2, "10.0.0.2", nbd.ErrRefused},
		{"secret of a previous boot", stale, "10.0.0.9", nbd.ErrRefused},
		{"machine never booted", "m-52-54-00-00-00-09-" + sec2, "10.0.0.9", nbd.ErrRefused},
		{"image name", "debian", "10.0.0.9", nbd.ErrUnknownExport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { lookupAndRead(t, f.m, tt.export, tt.remote, tt.want, f.bytes) })
	}
}

func write(t *testing.T, f *fixture, export string, p []byte, off int64) {
	t.Helper()
	e, err := f.m.Lookup(export, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	e.(io.Closer).Close()
}

func read(t *testing.T, f *fixture, export string, n int, off int64) []byte {
	t.Helper()
	e, err := f.m.Lookup(export, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.(io.Closer).Close()
	buf := make([]byte, n)
	if err := readExport(e, buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

func TestOverlayModes(t *testing.T) {
	marker := []byte("marker!!")
	for _, tt := range []struct {
		mode      string
		keptAfter bool // the marker survives the next boot
	}{{"ephemeral", false}, {"persistent", true}} {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFixture(t)
			mac := "52:54:00:00:00:01"
			ex := f.issue(t, mac, tt.mode)
			write(t, f, ex, marker, 0)
			// A reconnect within the boot sees its own writes.
			if got := read(t, f, ex, len(marker), 0); !bytes.Equal(got, marker) {
				t.Fatalf("after reconnect read %q, want %q", got, marker)
			}
			ex = f.issue(t, mac, tt.mode) // reboot
			got := read(t, f, ex, len(marker), 0)
			if bytes.Equal(got, marker) != tt.keptAfter {
				t.Fatalf("after reboot read %q; marker kept=%v, want %v", got, !tt.keptAfter, tt.keptAfter)
			}
			if err := f.m.Reset(mustMAC(mac), false); err != nil {
				t.Fatal(err)
			}
			if got := read(t, f, ex, len(marker), 0); !bytes.Equal(got, f.bytes[:len(marker)]) {
				t.Fatalf("after reset read %q, want the base", got)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		f := newFixture(t)
		e, err := f.m.Lookup(f.issue(t, "52:54:00:00:00:01", "none"), tcp("10.0.0.9"))
		if err != nil {
			t.Fatal(err)
		}
		defer e.(io.Closer).Close()
		if !e.Info().ReadOnly {
			t.Fatal("overlay none is writable")
		}
		if _, err := e.WriteAt(marker, 0); err == nil {
			t.Fatal("write to overlay none succeeded")
		}
	})
}

func TestResetRefusesConnected(t *testing.T) {
	f := newFixture(t)
	mac := mustMAC("52:54:00:00:00:01")
	ex := f.issue(t, mac.String(), "persistent")
	e, err := f.m.Lookup(ex, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	e.WriteAt([]byte("dirty"), 0)
	if err := f.m.Reset(mac, false); !errors.Is(err, inventory.ErrConflict) {
		t.Fatalf("reset of a connected machine: %v, want ErrConflict", err)
	}
	revoked := e.Info().Revoked
	if revoked == nil {
		t.Fatal("a machine's export cannot be revoked")
	}
	select {
	case <-revoked:
		t.Fatal("export revoked before any reset")
	default:
	}
	if err := f.m.Reset(mac, true); err != nil {
		t.Fatalf("forced reset: %v", err)
	}
	select {
	case <-revoked:
	default:
		t.Fatal("forced reset left the machine's sessions open")
	}
	buf := make([]byte, 5)
	readExport(e, buf, 0)
	if string(buf) == "dirty" {
		t.Fatal("forced reset kept the overlay")
	}
	if _, err := f.m.Lookup(ex, tcp("10.0.0.9")); !errors.Is(err, nbd.ErrRefused) {
		t.Fatalf("reconnect after a forced reset: %v, want refused", err)
	}
	e.(io.Closer).Close()
	if n := f.m.Sessions(mac); n != 0 {
		t.Fatalf("%d sessions after close", n)
	}
}

// release deletes content sha unless m says a machine uses it, as the
// images service does, and reports whether it did.
func release(m *Manager, sha string) (bool, error) {
	inUse, err := m.InUse(sha, func() error { return m.cfg.Blobs.Remove(sha) })
	return !inUse && err == nil, err
}

func TestReimportKeepsPersistentBase(t *testing.T) {
	f := newFixture(t)
	mac := "52:54:00:00:00:01"
	write(t, f, f.issue(t, mac, "persistent"), []byte("mine"), 0)
	old := f.img
	res, err := f.m.cfg.Blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat("new!", 64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	f.img = inventory.Image{Name: "debian", SHA256: res.SHA256, Size: res.Size}
	if deleted, err := release(f.m, old.SHA256); err != nil || deleted {
		t.Fatalf("release of a persistent overlay's base: deleted=%v err=%v, want kept", deleted, err)
	}
	ex := f.issue(t, mac, "persistent")
	if got := read(t, f, ex, 8, 0); string(got) != "minebase" {
		t.Fatalf("persistent machine after re-import reads %q, want its own blocks on the old base", got)
	}
	// Other machines get the new version.
	if got := read(t, f, f.issue(t, "52:54:00:00:00:05", "ephemeral"), 4, 0); string(got) != "new!" {
		t.Fatalf("new machine reads %q, want the new version", got)
	}
	if err := f.m.Reset(mustMAC(mac), false); err != nil {
		t.Fatal(err)
	}
	f.issue(t, mac, "persistent") // now on the new version
	if deleted, err := release(f.m, old.SHA256); err != nil || !deleted {
		t.Fatalf("release of unused content: deleted=%v err=%v", deleted, err)
	}
	if _, err := os.Stat(filepath.Join(f.m.cfg.Data, "images", "sha256", old.SHA256)); !os.IsNotExist(err) {
		t.Fatalf("released content still on disk: %v", err)
	}
}

func TestIssueErrors(t *testing.T) {
	f := newFixture(t)
	mac := mustMAC("52:54:00:00:00:01")
	if _, err := f.m.Issue(mac, f.img, "ram"); err == nil {
		t.Fatal("overlay ram accepted")
	}
	missing := f.img
	missing.SHA256 = strings.Repeat("0", 64)
	if _, err := f.m.Issue(mac, missing, ""); err == nil || !strings.Contains(err.Error(), "import the image again") {
		t.Fatalf("missing content: %v", err)
	}
	off, _ := New(Config{Data: t.TempDir(), Blobs: f.m.cfg.Blobs})
	if _, err := off.Issue(mac, f.img, ""); err == nil || !strings.Contains(err.Error(), "nbd.listen") {
		t.Fatalf("NBD off: %v", err)
	}
}

// TestSessionsShareOneDisk is what NBD_FLAG_CAN_MULTI_CONN promises: two
// open sessions of one machine reach the same disk, so a write on one is
// read on the other, and both advertise multi-conn.
func TestSessionsShareOneDisk(t *testing.T) {
	for _, mode := range []string{"ephemeral", "persistent"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			ex := f.issue(t, "52:54:00:00:00:01", mode)
			a, err := f.m.Lookup(ex, tcp("10.0.0.9"))
			if err != nil {
				t.Fatal(err)
			}
			defer a.(io.Closer).Close()
			b, err := f.m.Lookup(ex, tcp("10.0.0.9"))
			if err != nil {
				t.Fatal(err)
			}
			defer b.(io.Closer).Close()
			for _, e := range []nbd.Export{a, b} {
				if !e.Info().MultiConn {
					t.Fatal("a machine's export does not offer multi-conn")
				}
			}
			if _, err := a.WriteAt([]byte("shared"), 8192); err != nil {
				t.Fatal(err)
			}
			if err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 6)
			if err := readExport(b, got, 8192); err != nil || string(got) != "shared" {
				t.Fatalf("other session read %q, %v; want the first session's write", got, err)
			}
		})
	}
}

// TestRestartKeepsExports: a machine whose NBD connection drops while the
// server restarts reconnects to the export its script named, with the data
// it flushed; a forced reset or a damaged record voids the export.
func TestRestartKeepsExports(t *testing.T) {
	f := newFixture(t)
	restart := func() *Manager {
		t.Helper()
		m, err := New(f.m.cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.SetAddr("10.0.0.1", 10809)
		return m
	}
	ex := f.issue(t, "52:54:00:00:00:01", "ephemeral")
	e, err := f.m.Lookup(ex, tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt([]byte("flushed"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	e.(io.Closer).Close() // the connection dropped; the server goes down

	f.m = restart()
	e, err = f.m.Lookup(ex, tcp("10.0.0.9"))
	if err != nil {
		t.Fatalf("reconnect after a restart: %v", err)
	}
	got := make([]byte, 7)
	if err := readExport(e, got, 4096); err != nil || string(got) != "flushed" {
		t.Fatalf("after restart read %q, %v; want the flushed write", got, err)
	}
	if _, err := f.m.Lookup(wrongSecret(ex), tcp("10.0.0.9")); !errors.Is(err, nbd.ErrRefused) {
		t.Fatalf("wrong secret after restart: %v, want refused", err)
	}
	st, err := os.Stat(f.m.bootPath(mustMAC("52:54:00:00:00:01")))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("boot record: %v, mode %v; want 0600 (it holds the secret)", err, st.Mode().Perm())
	}

	if err := f.m.Reset(mustMAC("52:54:00:00:00:01"), true); err != nil {
		t.Fatal(err)
	}
	e.(io.Closer).Close()
	f.m = restart()
	if _, err := f.m.Lookup(ex, tcp("10.0.0.9")); !errors.Is(err, nbd.ErrRefused) {
		t.Fatalf("export after a forced reset and a restart: %v, want refused", err)
	}

	ex2 := f.issue(t, "52:54:00:00:00:03", "persistent")
	if err := os.WriteFile(f.m.bootPath(mustMAC("52:54:00:00:00:03")), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.m = restart()
	if _, err := f.m.Lookup(ex2, tcp("10.0.0.3")); !errors.Is(err, nbd.ErrRefused) {
		t.Fatalf("export with a damaged record: %v, want refused", err)
	}
}

// TestMachinesShareBaseImage: machines booting one image share its one
// open file (and mapping); the last to go closes it (with no linger).
func TestMachinesShareBaseImage(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.ImageLinger = -1
	var closers []io.Closer
	for mac, ip := range map[string]string{"52:54:00:00:00:01": "10.0.0.9", "52:54:00:00:00:02": "10.0.0.2"} { // 02 has a lease
		e, err := f.m.Lookup(f.issue(t, mac, "ephemeral"), tcp(ip))
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, e.(io.Closer))
	}
	a1, a2 := f.m.att["52:54:00:00:00:01"], f.m.att["52:54:00:00:00:02"]
	if a1 == nil || a2 == nil || a1.base != a2.base || len(f.m.images) != 1 {
		t.Fatalf("two machines on one image: bases %p and %p, %d images open; want one shared", a1.base, a2.base, len(f.m.images))
	}
	for i, c := range closers {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if want := 1 - i; len(f.m.images) != want {
			t.Fatalf("after %d of 2 machines detached: %d images open, want %d", i+1, len(f.m.images), want)
		}
	}
}
