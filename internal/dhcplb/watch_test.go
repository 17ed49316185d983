package dhcplb

import (
	"net"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

type table []inventory.ServerInfo

func (t table) Servers() []inventory.ServerInfo { return t }

func TestScope(t *testing.T) {
	if got := Scope("full", net.IPv4(10, 213, 0, 7), net.CIDRMask(24, 32)); got != "dhcp-full://10.213.0.0/24" {
		t.Fatalf("Scope = %q", got)
	}
}

func TestWatcherMembers(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lan := Scope("full", net.IPv4(10, 0, 0, 1), net.CIDRMask(24, 32))
	row := func(name string, ago time.Duration, addrs ...string) inventory.ServerInfo {
		return inventory.ServerInfo{Name: name, Addrs: addrs, Started: now.Add(-time.Hour), Heartbeat: now.Add(-ago)}
	}
	stopped := row("e", time.Second, lan)
	stopped.Stopped = now.Add(-time.Second)
	src := table{
		row("a", 0, "10.0.0.1", lan), // self
		row("b", 2*time.Second, "10.0.0.2", lan),
		row("c", time.Minute, "10.0.0.3", lan),                        // stale
		row("d", time.Second, "10.0.0.4"),                             // no DHCP
		row("f", time.Second, "10.1.0.4", "dhcp-full://10.1.0.0/24"),  // another LAN
		row("g", time.Second, "10.0.0.5", "dhcp-proxy://10.0.0.0/24"), // another mode
		stopped,
	}
	w := NewWatcher(WatchConfig{Source: src, Self: "a", Scope: lan, Now: func() time.Time { return now }})
	if !w.Fleet().Alone() {
		t.Fatal("before the first read the server must see itself alone")
	}
	w.Update()
	f := w.Fleet()
	if i, n := f.Slot(); f.Alone() || i != 0 || n != 2 {
		t.Fatalf("Slot = %d of %d, alone %v; want 0 of 2 (a and b live; c stale; d, e, f, g not on this LAN's DHCP)", i, n, f.Alone())
	}
	owners := map[string]bool{}
	for _, hw := range testMACs(1000) {
		owners[f.Decide(hw, 0).Owner] = true
	}
	if len(owners) != 3 || !owners["a"] || !owners["b"] || !owners["c"] {
		t.Fatalf("bucket owners %v, want a, b and c", owners)
	}
	if f.wait != 3 {
		t.Fatalf("wait = %d s, want DefaultWait", f.wait)
	}
}
