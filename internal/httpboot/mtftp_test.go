package httpboot

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// granter grants the paths in yes and records what it was asked.
type granter struct {
	yes   map[string]bool
	asked []string
	sizes []int64
}

func (g *granter) Grant(path string, size int64) bool {
	g.asked, g.sizes = append(g.asked, path), append(g.sizes, size)
	return g.yes[path]
}

// TestScriptMTFTP: a diskless profile's kernel comes by mtftp:// first
// when the group is granted to its path, with every HTTP URL after it;
// the TFTP path is what GrubTFTP serves. Profiles without a root, kernels
// named by URL, and paths the group is not granted to keep HTTP alone.
func TestScriptMTFTP(t *testing.T) {
	const self, b = "http://10.0.0.1:8080", "http://10.0.0.2:8080"
	dir := t.TempDir()
	kernel := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(kernel, make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &fakeKernels{dir: t.TempDir()}
	os.MkdirAll(filepath.Join(k.dir, oldSHA), 0o755)
	if err := os.WriteFile(filepath.Join(k.dir, oldSHA, kernelFile), make([]byte, 4321), 0o644); err != nil {
		t.Fatal(err)
	}
	root := inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}
	own := root
	own.Kernel = inventory.RootKernelImage
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"dl":    {Name: "dl", Kernel: kernel, Cmdline: "quiet", Root: root},
			"plain": {Name: "plain", Kernel: kernel, Cmdline: "quiet"},
			"url":   {Name: "url", Kernel: "http://mirror.example/vmlinuz", Cmdline: "quiet", Root: root},
			"own":   {Name: "own", Cmdline: "quiet", Root: own},
		},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "dl"), enrolled("52:54:00:00:00:02", "", "plain"),
			enrolled("52:54:00:00:00:03", "", "url"), enrolled("52:54:00:00:00:04", "", "own")},
	})
	imgPath := "images/" + oldSHA + "/vmlinuz"
	args := func(mac string) string {
		return " quiet bootfleet.root=nbd:10.0.0.1:10809:m-" + mac + "-secret"
	}
	tests := []struct {
		name    string
		mac     string
		granted []string
		bases   []string
		nilMT   bool
		want    string // the kernel line
		asked   string // the path Grant was asked, "" none
		size    int64
	}{
		{"local kernel granted", "52-54-00-00-00-01", []string{"profiles/dl/kernel"}, []string{self}, false,
			"kernel mtftp://10.0.0.1/profiles/dl/kernel" + args("52-54-00-00-00-01") + " || kernel " + self + "/profiles/dl/kernel?mac=52-54-00-00-00-01" + args("52-54-00-00-00-01") + " || goto failed",
			"profiles/dl/kernel", 1234},
		{"every mirror after it", "52-54-00-00-00-01", []string{"profiles/dl/kernel"}, []string{b, self}, false,
			"kernel mtftp://10.0.0.1/profiles/dl/kernel" + args("52-54-00-00-00-01") + " || kernel " + b + "/profiles/dl/kernel?mac=52-54-00-00-00-01" + args("52-54-00-00-00-01") +
				" || kernel " + self + "/profiles/dl/kernel?mac=52-54-00-00-00-01" + args("52-54-00-00-00-01") + " || goto failed",
			"profiles/dl/kernel", 1234},
		{"another kernel owns the group", "52-54-00-00-00-01", nil, []string{self}, false,
			"kernel " + self + "/profiles/dl/kernel?mac=52-54-00-00-00-01" + args("52-54-00-00-00-01") + " || goto failed",
			"profiles/dl/kernel", 1234},
		{"no diskless root", "52-54-00-00-00-02", []string{"profiles/plain/kernel"}, []string{self}, false,
			"kernel " + self + "/profiles/plain/kernel?mac=52-54-00-00-00-02 quiet || goto failed", "", 0},
		{"kernel named by URL", "52-54-00-00-00-03", nil, []string{self}, false,
			"kernel http://mirror.example/vmlinuz" + args("52-54-00-00-00-03") + " || goto failed", "", 0},
		{"image kernel granted", "52-54-00-00-00-04", []string{imgPath}, []string{self}, false,
			"kernel mtftp://10.0.0.1/" + imgPath + " initrd=initrd.img" + args("52-54-00-00-00-04") + " || kernel " + self + "/" + imgPath + "?mac=52-54-00-00-00-04 initrd=initrd.img" + args("52-54-00-00-00-04") + " || goto failed",
			imgPath, 4321},
		{"mtftp off", "52-54-00-00-00-01", []string{"profiles/dl/kernel"}, []string{self}, true,
			"kernel " + self + "/profiles/dl/kernel?mac=52-54-00-00-00-01" + args("52-54-00-00-00-01") + " || goto failed", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &granter{yes: map[string]bool{}}
			for _, p := range tt.granted {
				g.yes[p] = true
			}
			c := Config{Fleet: v, Boots: noClock{}, BaseURL: self, ServerIP: "10.0.0.1", Roots: pinnedRoots{oldSHA},
				Kernels: k, Mirrors: &mirrors{bases: tt.bases}, MTFTP: g}
			if tt.nilMT {
				c.MTFTP = nil
			}
			srv := httptest.NewServer(New(c))
			defer srv.Close()
			status, body := get(t, srv.URL+"/ipxe/"+tt.mac)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			wantLinesInOrder(t, body, []string{tt.want})
			if tt.asked == "" {
				if len(g.asked) != 0 {
					t.Fatalf("Grant asked for %v, want no call", g.asked)
				}
				return
			}
			if len(g.asked) != 1 || g.asked[0] != tt.asked || g.sizes[0] != tt.size {
				t.Fatalf("Grant asked %v sizes %v, want %s of %d bytes", g.asked, g.sizes, tt.asked, tt.size)
			}
		})
	}
}

// TestImageKernelSizeUnbuilt: a kernel still building has no size yet;
// the script does not wait for it.
func TestImageKernelSizeUnbuilt(t *testing.T) {
	s := &server{Config: Config{Kernels: &fakeKernels{dir: t.TempDir()}}}
	if got := s.imageKernelSize(oldSHA); got != -1 {
		t.Fatalf("size of an unbuilt kernel %d, want -1", got)
	}
}

// TestGrubTFTPImageFiles: TFTP serves an image's boot files under the
// paths HTTP does, so iPXE's fallback from mtftp:// finds them.
func TestGrubTFTPImageFiles(t *testing.T) {
	k := &fakeKernels{dir: t.TempDir()}
	os.MkdirAll(filepath.Join(k.dir, oldSHA), 0o755)
	os.WriteFile(filepath.Join(k.dir, oldSHA, kernelFile), []byte("the kernel"), 0o644)
	fsys := GrubTFTP(Config{Kernels: k}, nil)
	for _, tt := range []struct {
		path, want string
	}{
		{"images/" + oldSHA + "/vmlinuz", "the kernel"},
		{"/images/" + oldSHA + "/vmlinuz", "the kernel"},
		{"images/" + oldSHA + "/initrd.img", ""},
		{"images/" + strings.ToUpper(oldSHA) + "/vmlinuz", ""},
	} {
		f, err := fsys.Open(tt.path)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s opened, want refused", tt.path)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		b, _ := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
		f.Close()
		if string(b) != tt.want {
			t.Errorf("%s: %q, want %q", tt.path, b, tt.want)
		}
	}
}
