package app

import (
	"context"
	"log/slog"
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, slog.New(slog.DiscardHandler)) }()

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
	for deadline := time.Now().Add(20 * time.Second); len(l) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("after 20 s the server has not registered")
		}
		l = list()
	}
	if s := l[0]; len(l) != 1 || s.Name != "boot-test" || s.Status(time.Now()) != inventory.ServerLive || len(s.Addrs) == 0 || s.Addrs[0] != "127.0.0.1" {
		cancel()
		t.Fatalf("servers = %+v, want boot-test live at 127.0.0.1", l)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	if l = list(); len(l) != 1 || l[0].Status(time.Now()) != inventory.ServerStopped {
		t.Fatalf("after shutdown servers = %+v, want boot-test stopped", l)
	}
}
