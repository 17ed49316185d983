package httpboot

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
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
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// pinnedRoots issues every boot on content sha, as rootdisk does for a
// machine whose persistent overlay keeps an older image version.
type pinnedRoots struct{ sha string }

func (p pinnedRoots) IssueRoot(_ context.Context, mac net.HardwareAddr, root inventory.Root) (RootBoot, error) {
	return RootBoot{Arg: "nbd:10.0.0.1:10809:m-" + macPath(mac) + "-secret", Image: root.Image, SHA256: p.sha}, nil
}

// fakeKernels serves files from a directory laid out as DIR/SHA/FILE and
// fails content fail with a build error.
type fakeKernels struct {
	dir, fail string
	mu        sync.Mutex
	prepared  []string // "name sha"
	opened    int
}

func (k *fakeKernels) Prepare(name, sha string) {
	k.mu.Lock()
	k.prepared = append(k.prepared, name+" "+sha)
	k.mu.Unlock()
}

func (k *fakeKernels) Open(_ context.Context, sha, file string) (*os.File, error) {
	k.mu.Lock()
	k.opened++
	k.mu.Unlock()
	if sha == k.fail {
		return nil, fmt.Errorf("imagekernel: build the kernel and initramfs of image debian (sha256 %.12s): mount: permission denied", sha)
	}
	f, err := os.Open(filepath.Join(k.dir, sha, file))
	if err != nil {
		return nil, fmt.Errorf("no content %.12s: %w", sha, fs.ErrNotExist)
	}
	return f, nil
}

var (
	oldSHA = strings.Repeat("0123456789abcdef", 4)
	badSHA = strings.Repeat("f", 64)
)

func imageKernelServer(t *testing.T, kernels ImageKernels) (*httptest.Server, *testutil.SyncBuffer) {
	t.Helper()
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{"own": {Name: "own", Cmdline: "console=ttyS0",
			Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayPersistent, Kernel: inventory.RootKernelImage}}},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "own")},
	})
	logs := &testutil.SyncBuffer{}
	srv := httptest.NewServer(New(Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.1:8080",
		Roots: pinnedRoots{oldSHA}, Kernels: kernels, Logger: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	return srv, logs
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestImageKernelScript: the script of a root.kernel: image profile loads
// the kernel and initramfs of the content its NBD export serves, by
// sha256, names the initrd on the command line, and keeps bootfleet.root=.
func TestImageKernelScript(t *testing.T) {
	k := &fakeKernels{dir: t.TempDir()}
	srv, _ := imageKernelServer(t, k)
	status, body := get(t, srv.URL+"/ipxe/52-54-00-00-00-01")
	base := "http://10.0.0.1:8080/images/" + oldSHA
	want := "#!ipxe\n:start\n" +
		"kernel " + base + "/vmlinuz?mac=52-54-00-00-00-01 initrd=initrd.img console=ttyS0 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-00-00-01-secret || goto failed\n" +
		"initrd --name initrd.img " + base + "/initrd.img?mac=52-54-00-00-00-01 || goto failed\n" +
		"boot || goto failed\n"
	if status != 200 || !strings.HasPrefix(body, want) {
		t.Fatalf("got %d:\n%s\nwant a script starting:\n%s", status, body, want)
	}
	if len(k.prepared) != 1 || k.prepared[0] != "debian "+oldSHA {
		t.Fatalf("Prepare calls %q, want one for debian %s: the build starts while iPXE reads the script", k.prepared, oldSHA)
	}
	status, body = get(t, srv.URL+"/profiles/own/kernel")
	if status != 404 || !strings.Contains(body, "boots the kernel of its root image") {
		t.Fatalf("profile kernel of a root.kernel: image profile: %d %q, want 404 saying where its kernel is", status, body)
	}
}

func TestImageKernelScriptNeedsKernels(t *testing.T) {
	srv, _ := imageKernelServer(t, nil)
	status, body := get(t, srv.URL+"/ipxe/52-54-00-00-00-01")
	if status != 500 || !strings.Contains(body, "root.kernel is image, but this server builds no kernels from images") {
		t.Fatalf("got %d %q, want 500 naming root.kernel", status, body)
	}
}

func TestImageKernelFiles(t *testing.T) {
	k := &fakeKernels{dir: t.TempDir(), fail: badSHA}
	for file, data := range map[string]string{"vmlinuz": "the kernel", "initrd.img": "the initramfs"} {
		p := filepath.Join(k.dir, oldSHA, file)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, logs := imageKernelServer(t, k)
	for _, tt := range []struct {
		name, path string
		status     int
		body, log  string
	}{
		{"kernel", "/images/" + oldSHA + "/vmlinuz?mac=52-54-00-00-00-01", 200, "the kernel", "file sent"},
		{"initrd", "/images/" + oldSHA + "/initrd.img", 200, "the initramfs", "file sent"},
		{"unknown content", "/images/" + strings.Repeat("e", 64) + "/vmlinuz", 404, "no content eeeeeeeeeeee", "image kernel file refused"},
		{"failed build", "/images/" + badSHA + "/initrd.img?mac=52-54-00-00-00-01", 500, "mount: permission denied",
			`level=ERROR msg="image kernel unavailable" mac=52:54:00:00:00:01 sha256=` + badSHA + ` file=initrd.img`},
		{"not a sha", "/images/debian/vmlinuz", 404, "want /images/SHA256/vmlinuz", ""},
		{"other file", "/images/" + oldSHA + "/config", 404, "404 page not found", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(t, srv.URL+tt.path)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Fatalf("got %d %q, want %d and %q", status, body, tt.status, tt.body)
			}
			if tt.log != "" && !strings.Contains(logs.String(), tt.log) {
				t.Fatalf("log lacks %q:\n%s", tt.log, logs.String())
			}
		})
	}
	if !strings.Contains(logs.String(), "image debian") {
		t.Fatalf("the failed build's log line does not name the image:\n%s", logs.String())
	}
	if k.opened != 4 {
		t.Fatalf("Open called %d times, want 4: never for a malformed sha", k.opened)
	}
}
