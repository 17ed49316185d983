package httpboot

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

type milestones struct {
	mu  sync.Mutex
	got []string
}

func (m *milestones) Milestone(mac net.HardwareAddr, name, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, mac.String()+" "+name)
}

type noFiles struct{}

func (noFiles) Open(name string) (tftp.File, error) { return nil, fs.ErrNotExist }

// grubEnv is a fleet where pc1 (52:54:00:00:00:01) boots profile sb
// through grub and pc2 (…:02) boots linux through iPXE.
func grubEnv(t *testing.T) (Config, *milestones, string) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("signed kernel"), 0o644)
	os.WriteFile(filepath.Join(dir, "initrd.img"), []byte("initrd"), 0o644)
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"sb": {Name: "sb", Loader: inventory.LoaderGrub, Kernel: filepath.Join(dir, "vmlinuz"),
				Initrd: []string{filepath.Join(dir, "initrd.img")}, Cmdline: "console=ttyS0 done={{ .DoneURL }}"},
			"linux": {Name: "linux", Kernel: filepath.Join(dir, "vmlinuz")},
		},
		Machines:       []machineview.Machine{enrolled("52:54:00:00:00:01", "pc1", "sb"), enrolled("52:54:00:00:00:02", "pc2", "linux")},
		DefaultProfile: "linux",
		UnknownProfile: "linux",
	})
	ms := &milestones{}
	return Config{Fleet: v, Milestones: ms, BaseURL: "http://10.0.0.1:8080", ServerIP: "10.0.0.1"}, ms, dir
}

func readTFTP(t *testing.T, fsys tftp.FileSystem, name string) (string, error) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b), nil
}

// TestGrubTFTP: grub after PXE finds its first config where its prefix
// points, then its machine's config, which names only its profile's files
// as paths on the same server; a machine that does not boot through grub
// gets no config.
func TestGrubTFTP(t *testing.T) {
	c, ms, _ := grubEnv(t)
	fsys := GrubTFTP(c, noFiles{})
	for _, p := range []string{"/grub/grub.cfg", "grub/x86_64-efi/grub.cfg"} {
		if got, err := readTFTP(t, fsys, p); err != nil || !strings.Contains(got, "configfile $prefix/${net_default_mac}/grub.cfg") {
			t.Errorf("%s = %q, %v; want the first config", p, got, err)
		}
	}
	if got, err := readTFTP(t, fsys, "/grub/x86_64-efi/command.lst"); err != nil || got != "" {
		t.Errorf("command.lst = %q, %v; want an empty list", got, err)
	}
	cfg, err := readTFTP(t, fsys, "/grub/52:54:00:00:00:01/grub.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"if linux '/profiles/sb/kernel' 'console=ttyS0' 'done=http://10.0.0.1:8080/done/52-54-00-00-00-01'; then",
		"if initrd '/profiles/sb/initrd/0/initrd.img'; then",
		"source '/grub/52-54-00-00-00-01/milestone/secure-boot-on'",
		"source '/grub/52-54-00-00-00-01/milestone/failed-grub-kernel'",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if _, err := readTFTP(t, fsys, "/grub/52:54:00:00:00:02/grub.cfg"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("config of an iPXE machine: %v, want not found", err)
	}
	if got, err := readTFTP(t, fsys, "/profiles/sb/kernel"); err != nil || got != "signed kernel" {
		t.Errorf("profile kernel over TFTP = %q, %v", got, err)
	}
	for _, p := range []string{"/profiles/sb/initrd/1/x", "/profiles/nope/kernel", "/profiles/sb/cmdline", "/profiles/sb/initrd/-1/x"} {
		if _, err := readTFTP(t, fsys, p); err == nil {
			t.Errorf("%s was served; want only the files the profile names", p)
		}
	}
	if got, err := readTFTP(t, fsys, "/grub/52-54-00-00-00-01/milestone/secure-boot-on"); err != nil || !strings.HasPrefix(got, "#") {
		t.Errorf("milestone answer %q, %v: want a grub comment", got, err)
	}
	if want := "52:54:00:00:00:01 grub-config,52:54:00:00:00:01 secure-boot-on"; strings.Join(ms.got, ",") != want {
		t.Errorf("milestones %v, want %s", ms.got, want)
	}
	if _, err := readTFTP(t, fsys, "ipxe.efi"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("other names must reach the next file system: %v", err)
	}
}

// TestGrubHTTP: the same over HTTP, for a grub with http built in.
func TestGrubHTTP(t *testing.T) {
	c, ms, _ := grubEnv(t)
	srv := httptest.NewServer(New(c))
	defer srv.Close()
	get := func(p string) (int, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/grub/grub.cfg"); code != 200 || !strings.Contains(body, "configfile") {
		t.Errorf("/grub/grub.cfg = %d %q", code, body)
	}
	if code, body := get("/grub/52:54:00:00:00:01/grub.cfg"); code != 200 || !strings.Contains(body, "'/profiles/sb/kernel'") {
		t.Errorf("machine config = %d %q", code, body)
	}
	if code, _ := get("/grub/52:54:00:00:00:02/grub.cfg"); code != 404 {
		t.Errorf("config of an iPXE machine = %d, want 404", code)
	}
	if code, body := get("/grub/52-54-00-00-00-01/milestone/failed-grub-kernel"); code != 200 || !strings.HasPrefix(body, "#") {
		t.Errorf("milestone = %d %q", code, body)
	}
	if want := "52:54:00:00:00:01 grub-config,52:54:00:00:00:01 failed-grub-kernel"; strings.Join(ms.got, ",") != want {
		t.Errorf("milestones %v, want %s", ms.got, want)
	}
}
