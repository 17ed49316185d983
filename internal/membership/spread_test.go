package membership

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// fleetOf is a view over live servers named names, each loaded with the
// bytes/s in load (missing: idle), read once.
func fleetOf(t *testing.T, self string, load map[string]int64, names ...string) (*View, *table, *clock) {
	t.Helper()
	c := newClock(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	tab := &table{}
	var rows []inventory.ServerInfo
	for _, n := range names {
		rows = append(rows, inventory.ServerInfo{Name: n, Started: c.now().Add(-time.Hour), Heartbeat: c.now(),
			Addrs: []string{"10.0.0.1", "http://" + n + ":8080"}, Load: inventory.ServerLoad{BytesPerSec: load[n]}})
	}
	tab.set(rows, nil)
	v := NewView(ViewConfig{Store: tab, Self: self, Now: c.now})
	v.Refresh(context.Background())
	return v, tab, c
}

func macN(i int) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)} }

func firsts(s *Spread, n int, sha string) map[string]int {
	got := map[string]int{}
	for i := range n {
		got[s.Order(macN(i), sha, 0)[0].Name]++
	}
	return got
}

func TestSpreadOrder(t *testing.T) {
	t.Run("an idle fleet keeps a machine on this server", func(t *testing.T) {
		v, _, _ := fleetOf(t, "a", nil, "a", "b", "c")
		for i := range 20 {
			v.Refresh(context.Background()) // each machine on a fresh read: nothing counted yet
			if got := NewSpread(SpreadConfig{View: v}).Order(macN(i), "", 0); got[0].Name != "a" || len(got) != 3 {
				t.Errorf("machine %d: order %s, want a first and all three", i, names(got))
			}
		}
	})
	t.Run("a storm on one server spreads in equal shares", func(t *testing.T) {
		v, _, _ := fleetOf(t, "a", nil, "a", "b", "c")
		got := firsts(NewSpread(SpreadConfig{View: v}), 300, "")
		if want := map[string]int{"a": 101, "b": 100, "c": 99}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("first servers of 300 machines = %v, want %v (this server one boot ahead)", got, want)
		}
	})
	t.Run("a busy server comes last until the others catch up", func(t *testing.T) {
		// b serves 100 MB/s: one heartbeat of it is 1000 MB, about 15
		// default boots, so the first 30 machines go to a (one boot
		// ahead, being this server) and c.
		v, _, _ := fleetOf(t, "a", map[string]int64{"b": 100e6}, "a", "b", "c")
		s := NewSpread(SpreadConfig{View: v})
		got := firsts(s, 30, "")
		if got["b"] != 0 || got["a"] != 16 || got["c"] != 14 {
			t.Errorf("first servers of 30 machines = %v, want a 16, c 14, b none", got)
		}
		o := s.Order(macN(1000), "", 0)
		if len(o) != 3 {
			t.Fatalf("Order names %d servers, want all 3 as fallbacks", len(o))
		}
	})
	t.Run("only holders of the content, and this server", func(t *testing.T) {
		v, _, _ := fleetOf(t, "a", nil, "a", "b", "c", "d")
		s := NewSpread(SpreadConfig{View: v, Holders: func(sha string) ([]string, bool) {
			if sha == "known" {
				return []string{"c", "d"}, true
			}
			return nil, false
		}})
		for _, tt := range []struct {
			sha  string
			want []string
		}{{"known", []string{"a", "c", "d"}}, {"unknown", []string{"a", "b", "c", "d"}}, {"", []string{"a", "b", "c", "d"}}} {
			var names []string
			for _, sv := range s.Order(macN(1), tt.sha, 0) {
				names = append(names, sv.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tt.want) {
				t.Errorf("Order(sha %q) = %v, want %v", tt.sha, names, tt.want)
			}
		}
	})
	t.Run("a machine sent away keeps its server from read to read", func(t *testing.T) {
		v, _, _ := fleetOf(t, "a", map[string]int64{"a": 1e9}, "a", "b", "c")
		s := NewSpread(SpreadConfig{View: v})
		for i := range 20 {
			first := s.Order(macN(i), "", 0)[0].Name
			v.Refresh(context.Background()) // a new read: the counts start again
			if again := s.Order(macN(i), "", 0)[0].Name; again != first {
				t.Errorf("machine %d: first %s, after a new read %s", i, first, again)
			}
			v.Refresh(context.Background())
		}
	})
	t.Run("a stale server drops out", func(t *testing.T) {
		v, tab, c := fleetOf(t, "a", nil, "a", "b")
		c.add(inventory.StaleAfter + time.Second)
		rows, _ := tab.ListServers(context.Background())
		rows[0].Heartbeat = c.now() // a beats on; b stopped 31 s ago
		tab.set(rows, nil)
		v.Refresh(context.Background())
		if got := firsts(NewSpread(SpreadConfig{View: v}), 10, ""); got["a"] != 10 {
			t.Errorf("first servers = %v, want a for all 10", got)
		}
	})
}

func TestSpreadBaseURLs(t *testing.T) {
	v, tab, _ := fleetOf(t, "a", map[string]int64{"a": 1e9, "b": 1e6}, "a", "b", "c")
	rows, _ := tab.ListServers(context.Background())
	rows[0].Addrs = nil                  // a registered before it knew its base
	rows[2].Addrs = []string{"10.0.0.3"} // c has no HTTP base
	tab.set(rows, nil)
	v.Refresh(context.Background())
	s := NewSpread(SpreadConfig{View: v, SelfBaseURL: "http://self:8080"})
	got := s.BaseURLs(macN(7), "", 0)
	want := []string{"http://b:8080", "http://self:8080"}
	if !slices.Equal(got, want) {
		t.Errorf("BaseURLs = %v, want %v", got, want)
	}
}
