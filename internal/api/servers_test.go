package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestServers: GET /servers names each server live, stale or stopped by
// the API's clock (2026-01-02 03:04:05), with its load.
func TestServers(t *testing.T) {
	e := newEnv(t, false)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := context.Background()
	for _, s := range []inventory.ServerInfo{
		{Name: "a", Addrs: []string{"10.0.0.1"}, Version: "1.0", Started: now.Add(-time.Hour), Heartbeat: now.Add(-5 * time.Second)},
		{Name: "b", Version: "1.0", Started: now.Add(-time.Hour), Heartbeat: now.Add(-31 * time.Second)},
		{Name: "c", Version: "0.9", Started: now.Add(-time.Hour)},
	} {
		if err := e.store.RegisterServer(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.HeartbeatServer(ctx, "a", now.Add(-time.Hour), now.Add(-5*time.Second), inventory.ServerLoad{TFTPTransfers: 2, NBDSessions: 9, BytesPerSec: 1e6}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.StopServer(ctx, "c", now.Add(-time.Hour), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	var l ServerList
	e.mustDo(t, "GET", "/servers", "", http.StatusOK, &l)
	if len(l.Servers) != 3 {
		t.Fatalf("GET /servers = %+v, want 3 servers", l)
	}
	a, b, c := l.Servers[0], l.Servers[1], l.Servers[2]
	if a.Name != "a" || a.Status != "live" || a.Addrs[0] != "10.0.0.1" || a.TFTPTransfers != 2 || a.NBDSessions != 9 || a.BytesPerSec != 1e6 || a.Stopped != nil {
		t.Errorf("a = %+v, want live with its load", a)
	}
	if b.Status != "stale" || c.Status != "stopped" || c.Stopped == nil || !c.Stopped.Equal(now.Add(-time.Minute)) {
		t.Errorf("b = %+v, c = %+v; want b stale, c stopped a minute ago", b, c)
	}

	// The stale and the stopped one can be removed, the live one not.
	e.mustDo(t, "DELETE", "/servers/a", "", http.StatusConflict, nil)
	e.mustDo(t, "DELETE", "/servers/b", "", http.StatusNoContent, nil)
	e.mustDo(t, "DELETE", "/servers/c", "", http.StatusNoContent, nil)
	e.mustDo(t, "DELETE", "/servers/c", "", http.StatusNotFound, nil)
	e.mustDo(t, "GET", "/servers", "", http.StatusOK, &l)
	if len(l.Servers) != 1 || l.Servers[0].Name != "a" {
		t.Errorf("after removing b and c, GET /servers = %+v, want a only", l)
	}
}
