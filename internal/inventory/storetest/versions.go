package storetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testImageVersions walks one image through the workflow: import v1,
// a second import straight to test, an edit (maintenance, exclusive),
// commit, promote, rollback, retire, abandon; the image's current content
// follows production at every step.
func testImageVersions(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	sha := func(i int) string { return fmt.Sprintf("%064x", i) }
	current := func(wantVersion int, wantSHA string) {
		t.Helper()
		img := must[inventory.Image](t)(s.GetImage(c, "lab"))
		if img.Version != wantVersion || img.SHA256 != wantSHA {
			t.Fatalf("image lab is at version %d (%.8s), want %d (%.8s)", img.Version, img.SHA256, wantVersion, wantSHA)
		}
	}
	// The first version is production whatever it asks.
	v1 := must[inventory.ImageVersion](t)(s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(1), Size: 1 << 20,
		State: inventory.VersionTest, By: "ci", Made: t0, Stored: 4096}))
	if v1.Version != 1 || v1.State != inventory.VersionProduction || !v1.Promoted.Equal(t0) {
		t.Fatalf("first version = %+v, want version 1 in production, promoted at %v", v1, t0)
	}
	current(1, sha(1))
	v2 := must[inventory.ImageVersion](t)(s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(2), Size: 1 << 20,
		Parent: 1, State: inventory.VersionTest, By: "ci", Made: t0.Add(time.Minute), Stored: 512}))
	if v2.Version != 2 || v2.State != inventory.VersionTest {
		t.Fatalf("second version = %+v, want version 2 in test", v2)
	}
	current(1, sha(1))
	_, err := s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(9), Size: 1, Parent: 7, State: inventory.VersionTest})
	wantErr(t, err, inventory.ErrInvalid, "parent")

	// An edit is exclusive; the refusal names the holder.
	must[inventory.ImageVersion](t)(s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(2), Size: 1 << 20,
		Parent: 2, State: inventory.VersionMaintenance, Machine: "52:54:00:00:00:01", Server: "boot-a", By: "alice"}))
	if vs := must[[]inventory.ImageVersion](t)(s.ListImageVersions(c, "lab")); vs[2].Server != "boot-a" || vs[2].Machine != "52:54:00:00:00:01" {
		t.Fatalf("maintenance version read back as %+v", vs[2])
	}
	_, err = s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(2), Size: 1 << 20,
		Parent: 2, State: inventory.VersionMaintenance, Machine: "52:54:00:00:00:02", By: "bob"})
	wantErr(t, err, inventory.ErrConflict, "name")
	if err == nil || !strings.Contains(err.Error(), "52:54:00:00:00:01") {
		t.Fatalf("second edit: %v, want the holder named", err)
	}
	_, err = s.StepImageVersion(c, "lab", 3, inventory.OpPromote, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "state")
	_, err = s.CommitImageVersion(c, "lab", 2, sha(3), 77, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "state")
	v3 := must[inventory.ImageVersion](t)(s.CommitImageVersion(c, "lab", 3, sha(3), 77, time.Time{}))
	if v3.State != inventory.VersionTest || v3.Machine != "" || v3.Server != "" || v3.SHA256 != sha(3) || v3.Stored != 77 {
		t.Fatalf("committed = %+v, want test without machine, with its new content", v3)
	}

	must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", 2, inventory.OpPromote, time.Time{}))
	current(2, sha(2))
	must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", 3, inventory.OpPromote, time.Time{}))
	current(3, sha(3))
	_, err = s.StepImageVersion(c, "lab", 3, inventory.OpRetire, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "state")

	// Rollback goes back one promote at a time; the rolled-back version
	// is kept, in test.
	back := must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", 0, inventory.OpRollback, time.Time{}))
	if back.Version != 3 || back.State != inventory.VersionTest {
		t.Fatalf("rolled back = %+v, want version 3 back in test", back)
	}
	current(2, sha(2))
	must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", 0, inventory.OpRollback, time.Time{}))
	current(1, sha(1))
	_, err = s.StepImageVersion(c, "lab", 0, inventory.OpRollback, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "version")
	current(1, sha(1))

	pin := must[inventory.Profile](t)(s.CreateProfile(c, inventory.Profile{Name: "pinned", Kernel: "k", Root: inventory.Root{Image: "lab", Channel: "2"}}))
	if pin.Root.Channel != "2" {
		t.Fatalf("profile channel read back %q, want 2", pin.Root.Channel)
	}
	_, err = s.StepImageVersion(c, "lab", 2, inventory.OpRetire, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "version")
	if err == nil || !strings.Contains(err.Error(), "profile pinned") {
		t.Fatalf("retire of a pinned version: %v, want the profile named", err)
	}
	pin.Root.Channel = inventory.ChannelTest
	must[inventory.Profile](t)(s.UpdateProfile(c, pin))
	testMachineChannel(t, s, "lab", 2)
	must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", 2, inventory.OpRetire, time.Time{}))
	_, err = s.StepImageVersion(c, "lab", 2, inventory.OpPromote, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "state")
	_, err = s.StepImageVersion(c, "lab", 9, inventory.OpPromote, time.Time{})
	wantErr(t, err, inventory.ErrNotFound, "version")
	_, err = s.StepImageVersion(c, "none", 1, inventory.OpPromote, time.Time{})
	wantErr(t, err, inventory.ErrNotFound, "name")

	// A second edit after an abandon is welcome.
	v4 := must[inventory.ImageVersion](t)(s.AddImageVersion(c, inventory.ImageVersion{Image: "lab", SHA256: sha(1), Size: 1 << 20,
		Parent: 1, State: inventory.VersionMaintenance, Machine: "52:54:00:00:00:02"}))
	if gone := must[inventory.ImageVersion](t)(s.StepImageVersion(c, "lab", v4.Version, inventory.OpAbandon, time.Time{})); gone.Version != 4 {
		t.Fatalf("abandoned %+v, want version 4", gone)
	}
	s = b.Reopen(t, s)
	c = ctx(t)
	vs := must[[]inventory.ImageVersion](t)(s.ListImageVersions(c, "lab"))
	states := ""
	for _, v := range vs {
		states += fmt.Sprintf("%d:%s ", v.Version, v.State)
	}
	if states != "1:production 2:retired 3:test " {
		t.Fatalf("versions after reopen: %s", states)
	}
	if vs[1].Parent != 1 || vs[1].By != "ci" || vs[1].Stored != 512 || !vs[1].Made.Equal(t0.Add(time.Minute)) {
		t.Fatalf("version 2 read back as %+v", vs[1])
	}
	if all := must[[]inventory.ImageVersion](t)(s.ListImageVersions(c, "")); len(all) != 3 || all[2].Image != "lab" {
		t.Fatalf("every version: %+v, want lab's three", all)
	}
	_, err = s.ListImageVersions(c, "none")
	wantErr(t, err, inventory.ErrNotFound, "name")
	if err := s.DeleteProfile(c, "pinned"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteImage(c, "lab"); err != nil {
		t.Fatal(err)
	}
	// A name imported again starts over at version 1.
	again := must[inventory.Image](t)(s.PutImage(c, inventory.Image{Name: "lab", SHA256: sha(5), Size: 1}))
	if again.Version != 1 {
		t.Fatalf("re-made image at version %d, want 1", again.Version)
	}
}

// testImageVersionsPut checks that PutImage, the import of old,
// makes versions: each import is a new current production version.
func testImageVersionsPut(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	for i := 1; i <= 3; i++ {
		img := must[inventory.Image](t)(s.PutImage(c, inventory.Image{Name: "old", SHA256: fmt.Sprintf("%064x", i), Size: 1}))
		if img.Version != i {
			t.Fatalf("import %d made version %d", i, img.Version)
		}
	}
	vs := must[[]inventory.ImageVersion](t)(s.ListImageVersions(c, "old"))
	if len(vs) != 3 || vs[0].State != inventory.VersionProduction || vs[2].State != inventory.VersionProduction {
		t.Fatalf("versions = %+v, want three in production", vs)
	}
}

// testMachineChannel checks a machine's own channel round-trips, that a
// bad one is refused with the reason, and that a machine pinning version
// of image, through a profile of that image, stops its retire.
func testMachineChannel(t *testing.T, s inventory.Store, image string, version int) {
	c := ctx(t)
	pc := mac("52:54:00:00:00:21")
	_, err := s.CreateMachine(c, inventory.Machine{MAC: pc, Profile: "pinned", Channel: "v2"})
	wantErr(t, err, inventory.ErrInvalid, "root_channel")
	if err == nil || !strings.Contains(err.Error(), "want production, test or a version number") {
		t.Fatalf("bad machine channel: %v, want the reason", err)
	}
	m := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: pc, Profile: "pinned", Channel: strconv.Itoa(version)}))
	if m.Channel != strconv.Itoa(version) {
		t.Fatalf("machine channel read back %q, want %d", m.Channel, version)
	}
	_, err = s.StepImageVersion(c, image, version, inventory.OpRetire, time.Time{})
	wantErr(t, err, inventory.ErrConflict, "version")
	if err == nil || !strings.Contains(err.Error(), "machine "+pc.String()) {
		t.Fatalf("retire of a version a machine pins: %v, want the machine named", err)
	}
	// production is kept as said: on a machine it is not "follow the profile".
	m.Channel = inventory.ChannelProduction
	m = must[inventory.Machine](t)(s.UpdateMachine(c, m))
	if m.Channel != inventory.ChannelProduction {
		t.Fatalf("machine channel read back %q after update, want production", m.Channel)
	}
	listed := must[[]inventory.Machine](t)(s.ListMachines(c, inventory.MachineFilter{Profile: "pinned"}))
	if len(listed) != 1 || listed[0].Channel != inventory.ChannelProduction {
		t.Fatalf("listed %+v, want the machine with channel production", listed)
	}
	if err := s.DeleteMachine(c, pc); err != nil {
		t.Fatal(err)
	}
}

// AddVersions records versions 1, 2, ... of image in s, one per state, each
// over the one before: for tests of what pins and channels may name.
func AddVersions(t testing.TB, s inventory.ImageVersions, image string, states ...inventory.VersionState) {
	t.Helper()
	for i, state := range states {
		v := inventory.ImageVersion{Image: image, SHA256: strings.Repeat(string(rune('a'+i)), 64), Size: 1 << 20, Parent: i,
			State: state, Made: time.Now(), Stored: 1 << 20}
		if _, err := s.AddImageVersion(context.Background(), v); err != nil {
			t.Fatalf("add version %d of image %s: %v", i+1, image, err)
		}
	}
}
