package membership

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestDHCPPeers: the picture holds the servers of the table that
// registered this LAN's scope, live or stale, and no others.
func TestDHCPPeers(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lan := dhcplb.Scope("full", net.IPv4(10, 0, 0, 1), net.CIDRMask(24, 32))
	row := func(name string, ago time.Duration, addrs ...string) inventory.ServerInfo {
		return inventory.ServerInfo{Name: name, Addrs: addrs, Started: now.Add(-time.Hour), Heartbeat: now.Add(-ago)}
	}
	stopped := row("e", time.Second, lan)
	stopped.Stopped = now.Add(-time.Second)
	rows := []inventory.ServerInfo{
		row("a", 0, "10.0.0.1", lan), // self
		row("b", 2*time.Second, "10.0.0.2", lan),
		row("c", time.Minute, "10.0.0.3", lan),                        // stale
		row("d", time.Second, "10.0.0.4"),                             // no DHCP
		row("f", time.Second, "10.1.0.4", "dhcp-full://10.1.0.0/24"),  // another LAN
		row("g", time.Second, "10.0.0.5", "dhcp-proxy://10.0.0.0/24"), // another mode
		stopped,
	}
	tbl := &table{}
	tbl.set(rows, nil)
	view := NewView(ViewConfig{Store: tbl, Self: "a", Now: func() time.Time { return now }})
	view.Refresh(context.Background())
	w := NewDHCPPeers(DHCPPeersConfig{View: view, Scope: lan, Now: func() time.Time { return now }})
	if !w.Assignment().Alone() {
		t.Fatal("before the first read the server must see itself alone")
	}
	w.Update()
	f := w.Assignment()
	if i, n := f.Slot(); f.Alone() || i != 0 || n != 2 {
		t.Fatalf("Slot = %d of %d, alone %v; want 0 of 2 (a and b live; c stale; d, e, f, g not on this LAN's DHCP)", i, n, f.Alone())
	}
	owners := map[string]bool{}
	for i := range 1000 {
		owners[f.Decide(macN(i), 0).Owner] = true
	}
	if len(owners) != 3 || !owners["a"] || !owners["b"] || !owners["c"] {
		t.Fatalf("bucket owners %v, want a, b and c", owners)
	}
	if f.WaitSecs() != 3 {
		t.Fatalf("wait = %d s, want dhcplb.DefaultWait", f.WaitSecs())
	}
}
