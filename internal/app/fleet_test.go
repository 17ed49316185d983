package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
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

// TestRunRefusesLiveServersName: a second server on the same store under
// the name of a live one (two hosts cloned with one host name) refuses to
// start and says to set server.name; the first stays listed, live.
func TestRunRefusesLiveServersName(t *testing.T) {
	db := filepath.Join(t.TempDir(), sqlite.FileName)
	first, second := testConfig(t, testutil.FreeAddr(t)), testConfig(t, testutil.FreeAddr(t))
	for _, c := range []*config.Config{first, second} {
		c.Server.Name, c.Store = "boot-twin", db
	}
	startRun(t, first)
	live := func() error {
		st, err := sqlite.Open(context.Background(), db)
		if err != nil {
			return err
		}
		defer st.Close()
		l, err := st.ListServers(context.Background())
		if err == nil && (len(l) != 1 || l[0].Status(time.Now()) != inventory.ServerLive) {
			err = fmt.Errorf("servers %+v, want boot-twin live", l)
		}
		return err
	}
	testutil.Eventually(t, 20*time.Second, "the first server live", live)
	err := startRun(t, second).wait(t, 20*time.Second)
	if !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "set server.name") {
		t.Fatalf("second server under a live name: Run = %v, want a conflict saying to set server.name", err)
	}
	if err := live(); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
}
