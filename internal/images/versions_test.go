package images

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestVersionsWorkflow: an import to test leaves production alone; what
// boots each version is listed; a retire of a booted version is refused
// naming the machines; rollback brings the earlier content back at once.
func TestVersionsWorkflow(t *testing.T) {
	fl, s, _ := newKernelFleet(t)
	f := fl.boots
	ctx := context.Background()
	imported(t, s, "alpine", contentA)
	res, err := s.Import(ctx, Upload{Name: "alpine", Body: bytes.NewReader(contentB), By: "ci", State: inventory.VersionTest})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version.Version != 2 || res.Version.State != inventory.VersionTest || res.Version.By != "ci" || res.Image.SHA256 != hexSum(contentA) {
		t.Fatalf("import to test = %+v, want version 2 in test by ci, production still content A", res)
	}
	if _, err := s.Import(ctx, Upload{Name: "alpine", Body: bytes.NewReader(contentB), State: inventory.VersionMaintenance}); !errors.Is(err, inventory.ErrInvalid) {
		t.Fatalf("import to maintenance: %v, want ErrInvalid", err)
	}
	if _, err := fl.store.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "k", Root: inventory.Root{Image: "alpine"}}); err != nil {
		t.Fatal(err)
	}
	f.set(hexSum(contentB), true)
	vs, err := s.Versions(ctx, "alpine")
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions = %+v, %v", vs, err)
	}
	if !vs[0].Current || len(vs[0].Profiles) != 1 || vs[0].Profiles[0] != "lab" || vs[1].Current || len(vs[1].Users) != 1 {
		t.Fatalf("Versions = %+v, want 1 current booted by profile lab, 2 read by one machine", vs)
	}
	_, err = s.Step(ctx, "alpine", 2, inventory.OpRetire)
	if !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "machine 52:54:00:00:00:01") {
		t.Fatalf("retire of a booted version: %v, want a conflict naming the machine", err)
	}
	if _, err := s.Step(ctx, "alpine", 2, inventory.OpPromote); err != nil {
		t.Fatal(err)
	}
	if img, _ := s.cfg.Store.GetImage(ctx, "alpine"); img.SHA256 != hexSum(contentB) {
		t.Fatalf("after promote the image serves %.8s, want content B", img.SHA256)
	}
	if _, err := s.Step(ctx, "alpine", 0, inventory.OpRollback); err != nil {
		t.Fatal(err)
	}
	if img, _ := s.cfg.Store.GetImage(ctx, "alpine"); img.SHA256 != hexSum(contentA) || img.Version != 1 {
		t.Fatalf("after rollback the image is %+v, want version 1, content A", img)
	}
	f.set(hexSum(contentB), false)
	if _, err := s.Step(ctx, "alpine", 2, inventory.OpRetire); err != nil {
		t.Fatal(err)
	}
	if s.cfg.Blobs.Has(hexSum(contentB)) {
		t.Fatal("content only a retired version named is still here")
	}
}

// TestImportStoresDelta: a rebuilt image imported under its name costs
// the blocks that changed, and the version it is layered on keeps its
// content while the layer needs it, even retired.
func TestImportStoresDelta(t *testing.T) {
	_, s, _ := newKernelFleet(t)
	ctx := context.Background()
	v1 := bytes.Repeat([]byte("a rebuilt lab image, block by block. "), 8<<20/37)
	imported(t, s, "lab", v1)
	v2 := bytes.Clone(v1)
	copy(v2[3<<20:], bytes.Repeat([]byte{'2'}, 300<<10))
	res := imported(t, s, "lab", v2)
	if res.Version.Parent != 1 || res.Version.Stored > 512<<10 || res.Allocated != res.Version.Stored {
		t.Fatalf("rebuilt import: %+v; want version 2 over 1 storing at most 512 KiB of the %d", res.Version, len(v2))
	}
	v3 := bytes.Clone(v2)
	copy(v3[7<<20:], "three")
	imported(t, s, "lab", v3)
	if _, err := s.Step(ctx, "lab", 1, inventory.OpRetire); err != nil {
		t.Fatal(err)
	}
	if !s.cfg.Blobs.Has(hexSum(v1)) {
		t.Fatal("version 1's content deleted while version 2's layer is stored over it")
	}
	if _, err := s.Step(ctx, "lab", 2, inventory.OpRetire); err != nil {
		t.Fatal(err)
	}
	if !s.cfg.Blobs.Has(hexSum(v1)) || !s.cfg.Blobs.Has(hexSum(v2)) {
		t.Fatal("the contents under version 3's layers were deleted")
	}
}

// TestVersionsFollowers: each profile is listed under the version its
// channel boots.
func TestVersionsFollowers(t *testing.T) {
	fl, s, _ := newKernelFleet(t)
	ctx := context.Background()
	imported(t, s, "alpine", contentA)
	if _, err := s.Import(ctx, Upload{Name: "alpine", Body: bytes.NewReader(contentB), State: inventory.VersionTest}); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]string{"prod": "", "testers": "test", "pinned": "1"} {
		if _, err := fl.store.CreateProfile(ctx, inventory.Profile{Name: name, Kernel: "k", Root: inventory.Root{Image: "alpine", Channel: ch}}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := s.Versions(ctx, "alpine")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(vs[0].Profiles, ",") + "|" + strings.Join(vs[1].Profiles, ","); got != "pinned,prod|testers" {
		t.Fatalf("followers %q, want pinned,prod|testers", got)
	}
}
