package diskless

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagekernel"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/initramfs"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// fakeImages answers GetImage from a map.
type fakeImages map[string]inventory.Image

func (f fakeImages) ListImages(context.Context) ([]inventory.Image, error) { return nil, nil }
func (f fakeImages) ListImageVersions(_ context.Context, name string) ([]inventory.ImageVersion, error) {
	img := f[name]
	return []inventory.ImageVersion{{Image: name, Version: 1, SHA256: img.SHA256, Size: img.Size, State: inventory.VersionProduction}}, nil
}
func (f fakeImages) GetImage(_ context.Context, name string) (inventory.Image, error) {
	img, ok := f[name]
	if !ok {
		return img, inventory.NotFound("name", "no image named %q", name)
	}
	return img, nil
}
func (f fakeImages) PutImage(_ context.Context, img inventory.Image) (inventory.Image, error) {
	return img, nil
}
func (f fakeImages) DeleteImage(context.Context, string) error { return nil }

// newKernelService is a Service over images that builds kernels in a
// temporary data directory, with the directory and its content store.
func newKernelService(t *testing.T, images Images) (*Service, string, *imagestore.Store) {
	data := t.TempDir()
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	disks, err := rootdisk.New(rootdisk.Config{Data: data, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	build := func(w io.Writer, image string) (initramfs.Result, error) {
		io.WriteString(w, "initramfs")
		return initramfs.Result{KernelVersion: "9.9.9-test", Vmlinuz: []byte("kernel")}, nil
	}
	kernels, err := imagekernel.New(imagekernel.Config{Dir: filepath.Join(data, "kernels"), Blobs: blobs, Build: build})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kernels.Close() })
	return &Service{disks: disks, kernels: kernels, images: images, log: slog.New(slog.DiscardHandler)}, data, blobs
}

// TestPrepareKernels: the kernels of image content are built ahead for
// root.kernel: image profiles. (They go with the content: package images.)
func TestPrepareKernels(t *testing.T) {
	images := fakeImages{}
	d, data, blobs := newKernelService(t, images)
	res, err := blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat("root", 1024)))
	if err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(data, "kernels", res.SHA256, "vmlinuz")

	images["debian"] = inventory.Image{Name: "debian", SHA256: res.SHA256}
	d.PrepareKernels(machineview.Input{Profiles: map[string]inventory.Profile{
		"own":   {Root: inventory.Root{Image: "debian", Kernel: inventory.RootKernelImage}},
		"other": {Kernel: "/k", Root: inventory.Root{Image: "missing", Kernel: inventory.RootKernelImage}},
	}})
	deadline := time.Now().Add(5 * time.Second)
	for _, err := os.Stat(built); err != nil; _, err = os.Stat(built) {
		if time.Now().After(deadline) {
			t.Fatalf("PrepareKernels built nothing within 5s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
