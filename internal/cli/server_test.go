package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestServerList: three servers, live, stale and stopped by the API's
// clock (t0), in a table and in JSON.
func TestServerList(t *testing.T) {
	srv, st := newServer(t)
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", "")
	now = func() time.Time { return t0 }
	t.Cleanup(func() { now = time.Now })
	ctx := context.Background()
	started := t0.Add(-2 * time.Hour)
	for _, s := range []inventory.ServerInfo{
		{Name: "boot-a", Addrs: []string{"10.0.0.1", "http://10.0.0.1:8080"}, Version: "0.9.0-4-gabc1234", Started: started},
		{Name: "boot-b", Addrs: []string{"10.0.0.2", "http://10.0.0.2:8080"}, Version: "0.9.0-4-gabc1234", Started: started},
		{Name: "boot-c", Addrs: []string{"10.0.0.3", "http://10.0.0.3:8080"}, Version: "0.8.1", Started: started},
	} {
		if err := st.RegisterServer(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(name string, at time.Duration, l inventory.ServerLoad) {
		if err := st.HeartbeatServer(ctx, name, started, t0.Add(-at), l); err != nil {
			t.Fatal(err)
		}
	}
	beat("boot-a", 4*time.Second, inventory.ServerLoad{TFTPTransfers: 12, NBDSessions: 40, BytesPerSec: 117 << 20})
	beat("boot-b", 45*time.Second, inventory.ServerLoad{NBDSessions: 3, BytesPerSec: 2 << 10})
	if err := st.StopServer(ctx, "boot-c", started, t0.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--server", srv.URL, "--token", testToken, "--data", t.TempDir()}
	golden(t, "server-list", run(t, append([]string{"server", "list"}, conn...)...))
	golden(t, "server-list-json", run(t, append([]string{"server", "list", "-o", "json"}, conn...)...))
}

// TestServerRm: a stopped server goes, a live one is refused with what to
// do, an unknown one is not found.
func TestServerRm(t *testing.T) {
	srv, st := newServer(t)
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", "")
	ctx := context.Background()
	started := time.Now().Add(-time.Hour)
	for _, name := range []string{"boot-a", "boot-old"} {
		if err := st.RegisterServer(ctx, inventory.ServerInfo{Name: name, Started: started}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.HeartbeatServer(ctx, "boot-a", started, time.Now(), inventory.ServerLoad{}); err != nil {
		t.Fatal(err)
	}
	if err := st.StopServer(ctx, "boot-old", started, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--server", srv.URL, "--token", testToken, "--data", t.TempDir()}
	for _, tt := range []struct{ name, want string }{
		{"boot-old", "removed server boot-old\n"},
		{"boot-a", `server "boot-a" is live`},
		{"boot-old", `no server "boot-old" is registered`},
	} {
		if got := run(t, append([]string{"server", "rm", tt.name}, conn...)...); !strings.Contains(got, tt.want) {
			t.Errorf("server rm %s: %q, want %q in it", tt.name, got, tt.want)
		}
	}
	l, err := st.ListServers(ctx)
	if err != nil || len(l) != 1 || l[0].Name != "boot-a" {
		t.Errorf("servers left: %+v, %v; want boot-a only", l, err)
	}
}
