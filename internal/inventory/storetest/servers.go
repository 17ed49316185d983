package storetest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testServers registers two servers, beats one, reads the list back and
// checks live and stale by the clock passed to Status.
func testServers(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 4, 1, 9, 0, 0, 123456789, time.UTC) // nanoseconds: the store keeps micro
	a := inventory.ServerInfo{Name: "boot-a.lab", Addrs: []string{"10.0.0.1", "http://10.0.0.1:8080"}, Version: "0.9.0-3-gabc", Started: t0}
	bb := inventory.ServerInfo{Name: "boot-b", Addrs: []string{"10.0.0.2"}, Version: "0.9.0", Started: t0.Add(time.Second)}
	for _, si := range []inventory.ServerInfo{bb, a} {
		if err := s.RegisterServer(c, si); err != nil {
			t.Fatal(err)
		}
	}
	load := inventory.ServerLoad{TFTPTransfers: 12, NBDSessions: 40, BytesPerSec: 3 << 30}
	if err := s.HeartbeatServer(c, a.Name, a.Started, t0.Add(25*time.Second), load); err != nil {
		t.Fatal(err)
	}
	l := must[[]inventory.ServerInfo](t)(s.ListServers(c))
	if len(l) != 2 || l[0].Name != "boot-a.lab" || l[1].Name != "boot-b" {
		t.Fatalf("ListServers = %+v, want boot-a.lab then boot-b", l)
	}
	got := l[0]
	if !reflect.DeepEqual(got.Addrs, a.Addrs) || got.Version != a.Version || got.Load != load ||
		!got.Started.Equal(t0.Truncate(time.Microsecond)) || !got.Heartbeat.Equal(t0.Add(25*time.Second).Truncate(time.Microsecond)) || !got.Stopped.IsZero() {
		t.Fatalf("boot-a.lab read back as %+v", got)
	}
	if !l[1].Heartbeat.Equal(l[1].Started) || l[1].Load != (inventory.ServerLoad{}) {
		t.Fatalf("boot-b before any heartbeat = %+v, want its start as heartbeat and no load", l[1])
	}
	// b registered at t0+1s: live 29 s later, stale 31 s later.
	// a beat at t0+25s, so it is live at both.
	for _, tt := range []struct {
		at     time.Duration
		a, bst string
	}{{30 * time.Second, inventory.ServerLive, inventory.ServerLive}, {32 * time.Second, inventory.ServerLive, inventory.ServerStale},
		{56 * time.Second, inventory.ServerStale, inventory.ServerStale}} {
		if ga, gb := l[0].Status(t0.Add(tt.at)), l[1].Status(t0.Add(tt.at)); ga != tt.a || gb != tt.bst {
			t.Errorf("at t0+%v: a %s, b %s; want %s, %s", tt.at, ga, gb, tt.a, tt.bst)
		}
	}

	wantErr(t, s.HeartbeatServer(c, "nobody", t0, t0, load), inventory.ErrNotFound, "name")
	// Another server took a's name: a's heartbeats must not write over it.
	a2 := a
	a2.Started, a2.Addrs = t0.Add(time.Minute), []string{"10.0.0.9"}
	if err := s.RegisterServer(c, a2); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.HeartbeatServer(c, a.Name, a.Started, t0.Add(time.Minute), load), inventory.ErrConflict, "name")
	wantErr(t, s.StopServer(c, a.Name, a.Started, t0.Add(time.Minute)), inventory.ErrConflict, "name")
	wantErr(t, s.RegisterServer(c, inventory.ServerInfo{Name: "no spaces", Started: t0}), inventory.ErrInvalid, "name")
	wantErr(t, s.RegisterServer(c, inventory.ServerInfo{Name: "x"}), inventory.ErrInvalid, "started")

	if err := s.StopServer(c, bb.Name, bb.Started, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	l = must[[]inventory.ServerInfo](t)(s.ListServers(c))
	if len(l) != 2 || l[0].Addrs[0] != "10.0.0.9" || l[0].Load != (inventory.ServerLoad{}) || l[0].Status(t0.Add(time.Minute)) != inventory.ServerLive {
		t.Fatalf("after reopen boot-a.lab = %+v, want the second registration, live, no load", l[0])
	}
	if st := l[1].Status(t0.Add(2 * time.Minute)); st != inventory.ServerStopped || !l[1].Stopped.Equal(t0.Add(2*time.Minute).Truncate(time.Microsecond)) {
		t.Fatalf("boot-b after StopServer: %s, stopped %v; want stopped at t0+2m", st, l[1].Stopped)
	}
	// A restart registers again and is no longer stopped.
	bb.Started = t0.Add(3 * time.Minute)
	if err := s.RegisterServer(c, bb); err != nil {
		t.Fatal(err)
	}
	l = must[[]inventory.ServerInfo](t)(s.ListServers(c))
	if st := l[1].Status(t0.Add(3 * time.Minute)); st != inventory.ServerLive || !l[1].Stopped.IsZero() {
		t.Fatalf("boot-b after restart: %s, stopped %v; want live", st, l[1].Stopped)
	}
}

// testRemoveServer: a stale or stopped server's row goes, with the images
// it held; a live one stays, and an unknown name is not found.
func testRemoveServer(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	for _, name := range []string{"old", "live", "stopped"} {
		if err := s.RegisterServer(c, inventory.ServerInfo{Name: name, Addrs: []string{"10.0.0.1"}, Started: t0}); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Minute)
	if err := s.HeartbeatServer(c, "live", t0, at.Add(-time.Second), inventory.ServerLoad{}); err != nil {
		t.Fatal(err)
	}
	if err := s.StopServer(c, "stopped", t0, at.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("ab", 32)
	for _, name := range []string{"old", "live"} {
		if err := s.SetImageCopies(c, name, []inventory.ImageCopy{{Server: name, SHA256: sha, Since: t0}}); err != nil {
			t.Fatal(err)
		}
	}

	wantErr(t, s.RemoveServer(c, "live", at), inventory.ErrConflict, "name")
	wantErr(t, s.RemoveServer(c, "nobody", at), inventory.ErrNotFound, "name")
	for _, name := range []string{"old", "stopped"} {
		if err := s.RemoveServer(c, name, at); err != nil {
			t.Fatalf("RemoveServer(%s): %v", name, err)
		}
	}
	l := must[[]inventory.ServerInfo](t)(s.ListServers(c))
	if len(l) != 1 || l[0].Name != "live" {
		t.Fatalf("after removing old and stopped, ListServers = %+v, want live only", l)
	}
	copies := must[[]inventory.ImageCopy](t)(s.ListImageCopies(c))
	if len(copies) != 1 || copies[0].Server != "live" {
		t.Fatalf("after removing old, image copies = %+v, want live's only", copies)
	}
	// A removed server that comes back registers as before.
	if err := s.RegisterServer(c, inventory.ServerInfo{Name: "old", Started: at}); err != nil {
		t.Fatal(err)
	}
}

// testServerNameTaken: a second server under a live server's name is
// refused and the row stays the first one's; the same instance restarting
// takes its live row back, and anyone takes a stopped or stale row.
func testServerNameTaken(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	first := inventory.ServerInfo{Name: "boot", Instance: "first", Addrs: []string{"10.0.0.1"}, Started: t0}
	if err := s.RegisterServer(c, first); err != nil {
		t.Fatal(err)
	}
	heldBy := func(want string) {
		t.Helper()
		l := must[[]inventory.ServerInfo](t)(s.ListServers(c))
		if len(l) != 1 || l[0].Instance != want {
			t.Fatalf("servers = %+v, want boot held by %s alone", l, want)
		}
	}
	at := t0.Add(10 * time.Second)
	for _, other := range []string{"second", ""} {
		second := inventory.ServerInfo{Name: "boot", Instance: other, Addrs: []string{"10.0.0.2"}, Started: at, Heartbeat: at}
		err := s.RegisterServer(c, second)
		wantErr(t, err, inventory.ErrConflict, "name")
		if err != nil && !strings.Contains(err.Error(), "set server.name") {
			t.Errorf("refusal %q does not say to set server.name", err)
		}
	}
	heldBy("first")
	if err := s.HeartbeatServer(c, "boot", t0, at, inventory.ServerLoad{}); err != nil {
		t.Fatalf("the first server's heartbeat after the refusal: %v", err)
	}

	// The first server crashed and restarts at once: its own live row.
	restart := first
	restart.Started = at.Add(time.Second)
	if err := s.RegisterServer(c, restart); err != nil {
		t.Fatalf("restart of the same instance over its live row: %v", err)
	}
	heldBy("first")
	// It stops cleanly: the row is free for the second.
	if err := s.StopServer(c, "boot", restart.Started, at.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	second := inventory.ServerInfo{Name: "boot", Instance: "second", Started: at.Add(3 * time.Second)}
	if err := s.RegisterServer(c, second); err != nil {
		t.Fatalf("register over a stopped row: %v", err)
	}
	heldBy("second")
	// The second dies without a word: its row is the first's again once
	// stale, and not before.
	late := first
	late.Started = second.Started.Add(inventory.StaleAfter)
	wantErr(t, s.RegisterServer(c, late), inventory.ErrConflict, "name")
	late.Started = late.Started.Add(time.Second)
	if err := s.RegisterServer(c, late); err != nil {
		t.Fatalf("register over a stale row: %v", err)
	}
	heldBy("first")
}
