package diskless

import (
	"context"
	"net"
	"testing"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/membership"
)

// ownRoot is what this server's rootdisk renders: only itself.
type ownRoot struct{}

func (ownRoot) IssueRoot(_ context.Context, _ net.HardwareAddr, root inventory.Root) (httpboot.RootBoot, error) {
	return httpboot.RootBoot{Arg: "nbd:10.0.0.1:10809:r-x:y", SHA256: "c0ffee", Args: "bootfleet.overlay=" + root.Overlay}, nil
}

func server(name string, addrs ...string) inventory.ServerInfo {
	return inventory.ServerInfo{Name: name, Addrs: addrs}
}

// TestWithFailover: client overlays name every server the order gives,
// this server by the address it rendered; server-side overlays name only
// this server; servers without a usable NBD address are left out.
func TestWithFailover(t *testing.T) {
	nbdA := membership.NBDAddrEntry("10.0.0.9:1") // what A registered; A's own render wins
	fleet := []inventory.ServerInfo{
		server("a", "10.0.0.1", nbdA),
		server("c", "10.0.0.3", membership.NBDAddrEntry("10.0.0.3:10809")),
		server("old", "10.0.0.4", "http://10.0.0.4:8080"),
		server("b", membership.NBDAddrEntry("[fd00::2]:10809")),
		server("dup", membership.NBDAddrEntry("10.0.0.3:10809")),
		server("bad", "nbd://10.0.0.5"),
	}
	for _, tc := range []struct {
		name    string
		overlay string
		order   []inventory.ServerInfo
		want    string
	}{
		{"client-ram: every server, in order", inventory.OverlayClientRAM, fleet, "nbd:10.0.0.1:10809,10.0.0.3:10809,[fd00::2]:10809:r-x:y"},
		{"client-disk, self not first", inventory.OverlayClientDisk, []inventory.ServerInfo{fleet[1], fleet[0]}, "nbd:10.0.0.3:10809,10.0.0.1:10809:r-x:y"},
		{"self missing from the order: first", inventory.OverlayClientRAM, fleet[1:2], "nbd:10.0.0.1:10809,10.0.0.3:10809:r-x:y"},
		{"alone", inventory.OverlayClientRAM, fleet[:1], "nbd:10.0.0.1:10809:r-x:y"},
		{"ephemeral stays on its server", "ephemeral", fleet, "nbd:10.0.0.1:10809:r-x:y"},
		{"persistent stays on its server", "persistent", fleet, "nbd:10.0.0.1:10809:r-x:y"},
		{"none stays on its server", "none", fleet, "nbd:10.0.0.1:10809:r-x:y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := func(net.HardwareAddr, string) []inventory.ServerInfo { return tc.order }
			b, err := WithFailover(ownRoot{}, order, "a", nil).IssueRoot(context.Background(), nil, inventory.Root{Image: "i", Overlay: tc.overlay})
			if err != nil || b.Arg != tc.want || b.SHA256 != "c0ffee" || b.Args != "bootfleet.overlay="+tc.overlay {
				t.Errorf("IssueRoot = %+v, %v; want Arg %q and the rest unchanged", b, err, tc.want)
			}
		})
	}
}
