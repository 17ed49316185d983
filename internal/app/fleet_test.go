package app

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestRunRegistersInFleet: a server on the default SQLite store registers
// under server.name, live, with its address, and is marked stopped when
// it shuts down.
func TestRunRegistersInFleet(t *testing.T) {
	c := testConfig(t, testutil.FreeAddr(t))
	c.Server.Name = "boot-test"
	r := startRun(t, c)

	list := func() []inventory.ServerInfo {
		t.Helper()
		st, err := sqlite.Open(context.Background(), filepath.Join(c.Data, sqlite.FileName))
		if err != nil {
			return nil // not created yet
		}
		defer st.Close()
		l, err := st.ListServers(context.Background())
		if err != nil {
			return nil // not migrated yet
		}
		return l
	}
	var l []inventory.ServerInfo
	testutil.Eventually(t, 20*time.Second, "the server's registration", func() error {
		if l = list(); len(l) == 0 {
			return errors.New("no server listed")
		}
		return nil
	})
	if s := l[0]; len(l) != 1 || s.Name != "boot-test" || s.Status(time.Now()) != inventory.ServerLive || len(s.Addrs) == 0 || s.Addrs[0] != "127.0.0.1" {
		t.Fatalf("servers = %+v, want boot-test live at 127.0.0.1", l)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if l = list(); len(l) != 1 || l[0].Status(time.Now()) != inventory.ServerStopped {
		t.Fatalf("after shutdown servers = %+v, want boot-test stopped", l)
	}
}
