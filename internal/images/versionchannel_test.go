package images

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestVersionsMachineChannels: machines with their own root channel are
// listed against the version it picks, over their profile's: a pin
// against the pinned version, production against the current one; a
// machine without one is not listed (its profile is); one on the default
// profile counts too; and a retire of a version a machine's channel
// picks is refused naming it.
func TestVersionsMachineChannels(t *testing.T) {
	fl, s, _ := newKernelFleet(t)
	ctx := context.Background()
	s.cfg.DefaultProfile = "lab"
	imported(t, s, "alpine", contentA)
	if _, err := s.Import(ctx, Upload{Name: "alpine", Body: bytes.NewReader(contentB), State: inventory.VersionTest}); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.store.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "k", Root: inventory.Root{Image: "alpine", Channel: inventory.ChannelTest}}); err != nil {
		t.Fatal(err)
	}
	add := func(mac, name, profile, channel string) {
		t.Helper()
		hw, _ := net.ParseMAC(mac)
		if _, err := fl.store.CreateMachine(ctx, inventory.Machine{MAC: hw, Name: name, Profile: profile, Channel: channel}); err != nil {
			t.Fatal(err)
		}
	}
	add("52:54:00:00:00:11", "pinned", "lab", "1")
	add("52:54:00:00:00:12", "prod", "lab", inventory.ChannelProduction)
	add("52:54:00:00:00:13", "follower", "lab", "")
	add("52:54:00:00:00:14", "bydefault", "", "1")
	vs, err := s.Versions(ctx, "alpine")
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions = %+v, %v", vs, err)
	}
	want1 := []string{"pinned (52:54:00:00:00:11)", "prod (52:54:00:00:00:12)", "bydefault (52:54:00:00:00:14)"}
	slices.Sort(want1)
	got1 := slices.Sorted(slices.Values(vs[0].Machines))
	if !slices.Equal(got1, want1) || len(vs[1].Machines) != 0 {
		t.Fatalf("version 1 machines %q, version 2 machines %q; want %q on 1 and none on 2", vs[0].Machines, vs[1].Machines, want1)
	}
	if len(vs[1].Profiles) != 1 || vs[1].Profiles[0] != "lab" {
		t.Fatalf("version 2 profiles %q, want lab (test channel)", vs[1].Profiles)
	}
	// Version 2 is what the profile follows; a retire must wait for it,
	// so move the profile off it and pin a machine on it instead.
	p, _ := fl.store.GetProfile(ctx, "lab")
	p.Root.Channel = "1"
	if _, err := fl.store.UpdateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	hw, _ := net.ParseMAC("52:54:00:00:00:13")
	m, _ := fl.store.GetMachine(ctx, hw)
	m.Channel = inventory.ChannelTest
	if _, err := fl.store.UpdateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	_, err = s.Step(ctx, "alpine", 2, inventory.OpRetire)
	if !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "machine follower (52:54:00:00:00:13) (its own root channel") {
		t.Fatalf("retire of a version a machine's channel picks: %v, want a conflict naming the machine", err)
	}
}
