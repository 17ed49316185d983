package fleetservers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func TestNBDAddr(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"10.0.0.1", "http://10.0.0.1:8080", NBDAddrEntry("10.0.0.1:10809")}, "10.0.0.1:10809"},
		{[]string{"10.0.0.1", "http://10.0.0.1:8080"}, ""},
		{[]string{"nbd://10.0.0.1", "nbd://[fd00::1]:10809"}, "[fd00::1]:10809"},
		{nil, ""},
	} {
		if got := NBDAddr(inventory.ServerInfo{Addrs: tc.addrs}); got != tc.want {
			t.Errorf("NBDAddr(%q) = %q, want %q", tc.addrs, got, tc.want)
		}
	}
}

// TestSelfFirst: this server first whatever its name, then the other live
// servers by name; stale and stopped ones never; holders, once known,
// narrow the others but never drop this server.
func TestSelfFirst(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	live := func(name string) inventory.ServerInfo {
		return inventory.ServerInfo{Name: name, Started: now.Add(-time.Hour), Heartbeat: now.Add(-time.Second)}
	}
	stale := live("a-stale")
	stale.Heartbeat = now.Add(-time.Minute)
	stopped := live("b-stopped")
	stopped.Stopped = now.Add(-time.Minute)
	store := &table{rows: []inventory.ServerInfo{stale, stopped, live("c"), live("d"), live("e")}}
	v := NewView(ViewConfig{Store: store, Self: "d", Now: func() time.Time { return now }})
	v.Refresh(context.Background())
	for _, tc := range []struct {
		name    string
		holders func(string) ([]string, bool)
		sha     string
		want    []string
	}{
		{"no holders", nil, "abc", []string{"d", "c", "e"}},
		{"holders unknown", func(string) ([]string, bool) { return nil, false }, "abc", []string{"d", "c", "e"}},
		{"only e holds it", func(string) ([]string, bool) { return []string{"e", "a-stale"}, true }, "abc", []string{"d", "e"}},
		{"files every server has", func(string) ([]string, bool) { return nil, true }, "", []string{"d", "c", "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(SelfFirst(v, tc.holders)(nil, tc.sha)); got != strings.Join(tc.want, ",") {
				t.Errorf("order %s, want %q", got, tc.want)
			}
		})
	}
}
