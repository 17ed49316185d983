package httpboot

import (
	"errors"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/mtftp"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// fakeUKIs "builds" an image as the names of its inputs, of size bytes
// by Size's account; err fails both.
type fakeUKIs struct {
	dir  string
	size int64
	err  error
}

func (u fakeUKIs) Size(string, []string) (int64, error) { return u.size, u.err }

func (u fakeUKIs) Open(kernel string, initrds []string) (*os.File, error) {
	if u.err != nil {
		return nil, u.err
	}
	if u.dir == "" {
		// The scripts' background builds need no bytes; a relative path
		// would write into the package's source directory.
		return nil, errors.New("fakeUKIs: no dir to build in")
	}
	p := filepath.Join(u.dir, "uki")
	if err := os.WriteFile(p, []byte("uki of "+strings.Join(append([]string{kernel}, initrds...), " ")), 0o644); err != nil {
		return nil, err
	}
	return os.Open(p)
}

// TestScriptUKI: UEFI machines of a diskless profile get its UKI by
// mtftp:// when the group takes it, without initrd=, and fall through to
// the plain lines; a UKI too large for MTFTP, one the server cannot
// build, or the group owned by the kernel's path leave the kernel alone
// on the group, as before.
func TestScriptUKI(t *testing.T) {
	const self = "http://10.0.0.1:8080"
	dir := t.TempDir()
	kernel, initrd := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
	os.WriteFile(kernel, make([]byte, 1234), 0o644)
	os.WriteFile(initrd, make([]byte, 99), 0o644)
	k := &fakeKernels{dir: t.TempDir()}
	os.MkdirAll(filepath.Join(k.dir, oldSHA), 0o755)
	os.WriteFile(filepath.Join(k.dir, oldSHA, kernelFile), make([]byte, 4321), 0o644)
	os.WriteFile(filepath.Join(k.dir, oldSHA, initrdFile), make([]byte, 321), 0o644)
	root := inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}
	own := root
	own.Kernel = inventory.RootKernelImage
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"dl":  {Name: "dl", Kernel: kernel, Initrd: []string{initrd}, Cmdline: "quiet", Root: root},
			"own": {Name: "own", Cmdline: "quiet", Root: own},
		},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "dl"), enrolled("52:54:00:00:00:04", "", "own")},
	})
	args := func(mac string) string { return " quiet bootfleet.root=nbd:10.0.0.1:10809:m-" + mac + "-secret" }
	const dl, own1 = "52-54-00-00-00-01", "52-54-00-00-00-04"
	plainKernel := "kernel " + self + "/profiles/dl/kernel?mac=" + dl + " initrd=initrd.img" + args(dl) + " || goto failed"
	tests := []struct {
		name   string
		mac    string
		ukis   UKIs
		holder string // the path that owns the group before the script
		want   []string
		owner  string // the path that owns it after
	}{
		{"uki on the group", dl, fakeUKIs{size: 5000}, "", []string{
			"iseq ${platform} efi || goto plain",
			"kernel mtftp://10.0.0.1/profiles/dl/boot.efi" + args(dl) + " || goto plain",
			"boot || goto plain", ":plain", "imgfree", plainKernel,
			"initrd --name initrd.img " + self + "/profiles/dl/initrd/0/initrd.img?mac=" + dl + " || goto failed",
			"boot || goto failed",
		}, "profiles/dl/boot.efi"},
		{"image's uki", own1, fakeUKIs{size: 5000}, "", []string{
			"kernel mtftp://10.0.0.1/images/" + oldSHA + "/boot.efi" + args(own1) + " || goto plain",
			"kernel " + self + "/images/" + oldSHA + "/vmlinuz?mac=" + own1 + " initrd=initrd.img" + args(own1) + " || goto failed",
		}, "images/" + oldSHA + "/boot.efi"},
		{"uki at MTFTP's limit", dl, fakeUKIs{size: mtftp.MaxSize + 1}, "", []string{
			"kernel mtftp://10.0.0.1/profiles/dl/kernel initrd=initrd.img" + args(dl) + " || " + plainKernel,
		}, "profiles/dl/kernel"},
		{"no stub", dl, fakeUKIs{err: errors.New("no systemd-stub")}, "", []string{
			"kernel mtftp://10.0.0.1/profiles/dl/kernel initrd=initrd.img" + args(dl) + " || " + plainKernel,
		}, "profiles/dl/kernel"},
		{"kernel owns the group", dl, fakeUKIs{size: 5000}, "profiles/dl/kernel", []string{
			"kernel mtftp://10.0.0.1/profiles/dl/kernel initrd=initrd.img" + args(dl) + " || " + plainKernel,
		}, "profiles/dl/kernel"},
		{"another file owns the group", dl, fakeUKIs{size: 5000}, "profiles/other/boot.efi", []string{plainKernel}, "profiles/other/boot.efi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := mtftp.New(mtftp.Config{})
			if tt.holder != "" && !mt.Grant(tt.holder, 1) {
				t.Fatal("a fresh group refused its first path")
			}
			c := Config{Fleet: v, Boots: noClock{}, BaseURL: self, ServerIP: "10.0.0.1", Roots: pinnedRoots{oldSHA},
				Kernels: k, Mirrors: &mirrors{bases: []string{self}}, MTFTP: mt, UKIs: tt.ukis}
			srv := httptest.NewServer(New(c))
			defer srv.Close()
			status, body := get(t, srv.URL+"/ipxe/"+tt.mac)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			wantLinesInOrder(t, body, tt.want)
			named := 1
			if !strings.HasPrefix(tt.owner, "profiles/dl/") && !strings.HasPrefix(tt.owner, "images/") {
				named = 0
			}
			if strings.Contains(body, "boot.efi") != (named == 1 && strings.HasSuffix(tt.owner, "boot.efi")) || strings.Count(body, "mtftp://") != named {
				t.Fatalf("script names the wrong files by mtftp://:\n%s", body)
			}
			for _, p := range []string{"profiles/dl/kernel", "profiles/dl/boot.efi", "images/" + oldSHA + "/boot.efi", "profiles/other/boot.efi"} {
				if got := mt.Grant(p, 1); got != (p == tt.owner) {
					t.Errorf("after the script, Grant(%s) = %v; want the group to be %s's", p, got, tt.owner)
				}
			}
		})
	}
}

// TestUKIServed: HTTP and TFTP answer a UKI's path with the same bytes,
// so iPXE's fallback from mtftp:// to plain TFTP gets what the group
// sends; profiles with URLs and servers without a stub answer none.
func TestUKIServed(t *testing.T) {
	dir := t.TempDir()
	kernel, initrd := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
	os.WriteFile(kernel, []byte("k"), 0o644)
	os.WriteFile(initrd, []byte("i"), 0o644)
	k := &fakeKernels{dir: t.TempDir()}
	os.MkdirAll(filepath.Join(k.dir, oldSHA), 0o755)
	os.WriteFile(filepath.Join(k.dir, oldSHA, kernelFile), []byte("k"), 0o644)
	os.WriteFile(filepath.Join(k.dir, oldSHA, initrdFile), []byte("i"), 0o644)
	v := newView(t, machineview.Input{Profiles: map[string]inventory.Profile{
		"dl":  {Name: "dl", Kernel: kernel, Initrd: []string{initrd}},
		"url": {Name: "url", Kernel: kernel, Initrd: []string{"http://mirror.example/initrd.img"}},
	}})
	tests := []struct {
		name, path string
		ukis       UKIs
		want       string // "" refused
	}{
		{"profile", "profiles/dl/boot.efi", fakeUKIs{dir: t.TempDir()}, "uki of " + kernel + " " + initrd},
		{"image", "images/" + oldSHA + "/boot.efi", fakeUKIs{dir: t.TempDir()}, "uki of " + filepath.Join(k.dir, oldSHA, kernelFile) + " " + filepath.Join(k.dir, oldSHA, initrdFile)},
		{"initrd by URL", "profiles/url/boot.efi", fakeUKIs{dir: t.TempDir()}, ""},
		{"no such profile", "profiles/nope/boot.efi", fakeUKIs{dir: t.TempDir()}, ""},
		{"bad sha", "images/" + badSHA + "/boot.efi", fakeUKIs{dir: t.TempDir()}, ""},
		{"no stub", "profiles/dl/boot.efi", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.1:8080", Kernels: k, UKIs: tt.ukis}
			srv := httptest.NewServer(New(c))
			defer srv.Close()
			status, body := get(t, srv.URL+"/"+tt.path)
			f, err := GrubTFTP(c, refuseFS{}).Open(tt.path)
			if tt.want == "" {
				if status == 200 || err == nil {
					t.Fatalf("HTTP %d %q, TFTP err %v: want both refused", status, body, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("TFTP: %v", err)
			}
			b, _ := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
			f.Close()
			if status != 200 || body != tt.want || string(b) != tt.want {
				t.Fatalf("HTTP %d %q, TFTP %q; want both %q", status, body, b, tt.want)
			}
		})
	}
}

// refuseFS is a TFTP root with nothing in it.
type refuseFS struct{}

func (refuseFS) Open(name string) (tftp.File, error) { return nil, fs.ErrNotExist }
