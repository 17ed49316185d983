package inventorysvc

import (
	"context"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// fullConfig is a config in full DHCP mode, so machines may reserve
// addresses.
func fullConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Parse(strings.NewReader("dhcp: {mode: full, range: 10.0.0.100-10.0.0.200}\ninterface: br0\n" + y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestApplyConfig(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	// A machine that booted before the admin listed it in the config.
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: mac("52:54:00:00:00:02"), State: inventory.StateDiscovered}); err != nil {
		t.Fatal(err)
	}
	first := fullConfig(t, `
default_profile: linux
profiles:
  linux: {kernel: /k, initrd: [/i], cmdline: "console=ttyS0"}
  rescue: {kernel: /r}
machines:
  - {mac: "52:54:00:00:00:01", name: pc1, profile: rescue, ip: 10.0.0.50}
  - {mac: "52:54:00:00:00:02", name: pc2}
`)
	a, err := ApplyConfig(ctx, st, first)
	if err != nil {
		t.Fatal(err)
	}
	if a != (Applied{Profiles: 2, Machines: 2}) {
		t.Fatalf("first apply: %+v", a)
	}
	pc2, _ := st.GetMachine(ctx, mac("52:54:00:00:00:02"))
	if pc2.State != inventory.StateReady || pc2.Source != inventory.SourceConfig || pc2.Name != "pc2" {
		t.Fatalf("a discovered machine named in the config: %+v, want ready and owned by the config", pc2)
	}
	// The API adds a machine on the config's linux profile, and labels pc1.
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: mac("52:54:00:00:00:03"), Name: "api1", Profile: "linux"}); err != nil {
		t.Fatal(err)
	}
	pc1, _ := st.GetMachine(ctx, mac("52:54:00:00:00:01"))
	pc1.Labels = map[string]string{"room": "a"}
	if _, err := st.UpdateMachine(ctx, pc1); err != nil {
		t.Fatal(err)
	}

	// The admin drops pc2, linux and rescue from the file and moves pc1.
	second := fullConfig(t, `
profiles:
  memtest: {kernel: /m}
machines:
  - {mac: "52:54:00:00:00:01", name: pc1, profile: memtest}
`)
	if a, err = ApplyConfig(ctx, st, second); err != nil {
		t.Fatal(err)
	}
	if a != (Applied{Profiles: 1, Machines: 1, Removed: 2, Released: 1}) {
		t.Fatalf("second apply: %+v, want pc2 and rescue removed, linux released", a)
	}
	pc1, _ = st.GetMachine(ctx, mac("52:54:00:00:00:01"))
	if pc1.Profile != "memtest" || pc1.IP != nil || pc1.Labels["room"] != "a" {
		t.Fatalf("pc1 after the second apply: %+v, want memtest, no reservation, labels kept", pc1)
	}
	if _, err := st.GetMachine(ctx, mac("52:54:00:00:00:02")); err == nil {
		t.Fatal("pc2 is still there after leaving the config")
	}
	if p, err := st.GetProfile(ctx, "linux"); err != nil || p.Source != inventory.SourceAPI {
		t.Fatalf("linux is still used by api1, so it must stay, owned by the API; got %+v, %v", p, err)
	}
	if _, err := st.GetProfile(ctx, "rescue"); err == nil {
		t.Fatal("unused rescue profile survived leaving the config")
	}

	// A config machine may not take an API machine's name.
	clash := fullConfig(t, `
profiles: {memtest: {kernel: /m}}
machines:
  - {mac: "52:54:00:00:00:01", name: pc1, profile: memtest}
  - {mac: "52:54:00:00:00:04", name: api1}
`)
	_, err = ApplyConfig(ctx, st, clash)
	if err == nil || !strings.Contains(err.Error(), "machines[1]") || !strings.Contains(err.Error(), "added through the API") {
		t.Fatalf("name clash: %v", err)
	}
}

// TestRootKernelToStore: root.kernel goes from the config file into the
// store (inventorysvc tests the way back into the fleet view).
func TestRootKernelToStore(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	c := fullConfig(t, `
profiles:
  own: {cmdline: quiet, root: {image: debian, kernel: image}}
  plain: {kernel: /k, root: {image: debian}}
`)
	if _, err := ApplyConfig(ctx, st, c); err != nil {
		t.Fatal(err)
	}
	p, err := st.GetProfile(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	if p.Root.Kernel != inventory.RootKernelImage || p.Kernel != "" || p.Root.Image != "debian" {
		t.Fatalf("stored profile = %+v, want root kernel image of debian and no kernel", p)
	}
}
