package membership

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/postgres"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.PostgresMain(m)) }

// clock is a test clock the registries read and the test moves.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time                       { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration)                  { c.ns.Add(int64(d)) }
func newClock(t time.Time) *clock                     { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) status(s inventory.ServerInfo) string { return s.Status(c.now()) }

// cutOff is a store that can lose its database, as a server cut off from
// PostgreSQL (or hung) does: its heartbeats stop arriving.
type cutOff struct {
	inventory.Servers
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (s *cutOff) HeartbeatServer(ctx context.Context, name string, started, at time.Time, l inventory.ServerLoad) error {
	if s.down.Load() {
		return errDown
	}
	return s.Servers.HeartbeatServer(ctx, name, started, at, l)
}

func (s *cutOff) StopServer(ctx context.Context, name string, started, at time.Time) error {
	if s.down.Load() {
		return errDown
	}
	return s.Servers.StopServer(ctx, name, started, at)
}

// syncBuf is a log buffer safe for the registry goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestTwoServersOnePostgres runs two registries, each with its own
// connection pool as two servers would have, on one PostgreSQL: both show
// live with their load; when B's heartbeats stop, B turns stale 30 s later
// while A stays live; B comes back by itself once its database does; A's
// shutdown marks it stopped.
func TestTwoServersOnePostgres(t *testing.T) {
	dsn := testutil.FreshPostgres(t)
	clk := newClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	open := func() inventory.Store {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	storeA, storeB := open(), &cutOff{Servers: open()}
	var logB syncBuf
	start := func(name string, st inventory.Servers, c Counters, log *slog.Logger) (stop func()) {
		var bytes atomic.Uint64
		r, err := New(Config{Store: st, Name: name, Addrs: []string{"10.0.0." + name[len(name)-1:]}, Interval: time.Second,
			Now: clk.now, Logger: log, Counters: func() Counters {
				c.BytesServed = bytes.Add(1_000_000) // a megabyte more at each read
				return c
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop
	}
	stopA := start("boot-a", storeA, Counters{TFTPTransfers: 3, NBDSessions: 7}, nil)
	start("boot-b", storeB, Counters{NBDSessions: 1}, slog.New(slog.NewTextHandler(&logB, nil)))

	// waitFor polls the table (as another server would read it) until ok.
	waitFor := func(what string, ok func(a, b inventory.ServerInfo) bool) (a, b inventory.ServerInfo) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			l, err := storeA.ListServers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(l) == 2 && ok(l[0], l[1]) {
				return l[0], l[1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s, still not %s: %+v", what, l)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a, b := waitFor("both registered", func(a, b inventory.ServerInfo) bool { return true })
	if a.Name != "boot-a" || b.Name != "boot-b" || clk.status(a) != inventory.ServerLive || clk.status(b) != inventory.ServerLive {
		t.Fatalf("got %s %s, %s %s; want boot-a and boot-b live", a.Name, clk.status(a), b.Name, clk.status(b))
	}
	if a.Version == "" || a.Addrs[0] != "10.0.0.a" || a.Load.TFTPTransfers != 3 || a.Load.NBDSessions != 7 {
		t.Fatalf("boot-a = %+v, want version, address and load", a)
	}

	// B loses its database; time passes (both beat every second, A still
	// reaches the store).
	storeB.down.Store(true)
	clk.add(31 * time.Second)
	later := clk.now()
	a, b = waitFor("A beating at the new time", func(a, _ inventory.ServerInfo) bool { return !a.Heartbeat.Before(later) })
	if clk.status(a) != inventory.ServerLive || clk.status(b) != inventory.ServerStale {
		t.Fatalf("31 s after B's heartbeats stopped: A %s, B %s; want A live, B stale", clk.status(a), clk.status(b))
	}
	if a.Load.BytesPerSec <= 0 {
		t.Fatalf("A's load %+v: want bytes/s from its growing counter", a.Load)
	}
	if !strings.Contains(logB.String(), "heartbeat failed") || !strings.Contains(logB.String(), errDown.Error()) {
		t.Fatalf("B's log does not say its heartbeat failed:\n%s", logB.String())
	}

	// B's database is back: B retries on its own and is live again.
	storeB.down.Store(false)
	waitFor("B live again", func(_, b inventory.ServerInfo) bool { return clk.status(b) == inventory.ServerLive })

	stopA()
	a, _ = waitFor("A stopped", func(a, _ inventory.ServerInfo) bool { return true })
	if clk.status(a) != inventory.ServerStopped || a.Load != (inventory.ServerLoad{}) {
		t.Fatalf("after A's shutdown: %s, load %+v; want stopped, no load", clk.status(a), a.Load)
	}
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := New(Config{Name: "a"}); err == nil {
		t.Error("New without a store: no error")
	}
	_, err := New(Config{Store: &cutOff{}, Name: "has space"})
	if err == nil || !strings.Contains(err.Error(), "server.name") {
		t.Errorf("New with a bad name: %v, want an error naming server.name", err)
	}
	r, err := New(Config{Store: &cutOff{}, Name: "a", Interval: time.Hour})
	if err != nil || r.cfg.Interval != inventory.StaleAfter/2 || r.cfg.WriteTimeout != 5*time.Second {
		t.Errorf("Interval 1h: %v, %v, %v; want clamped to %v, timeout 5s", err, r.cfg.Interval, r.cfg.WriteTimeout, inventory.StaleAfter/2)
	}
}

// TestSameNameRefused: a second server under the live name of the first
// (another instance: a cloned host) is refused with what to do, and the
// first keeps its row; the first, restarted with its instance, takes its
// row back at once; a stopped row is anyone's.
func TestSameNameRefused(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) inventory.Store
	}{{"sqlite", func(t *testing.T) inventory.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}, {"postgres", func(t *testing.T) inventory.Store {
		s, err := postgres.Open(context.Background(), testutil.FreshPostgres(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}} {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			t.Cleanup(func() { st.Close() })
			clk := newClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
			registry := func(instance, addr string) *Registry {
				r, err := New(Config{Store: st, Name: "boot", Instance: instance, Addrs: []string{addr}, Now: clk.now})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			held := func() inventory.ServerInfo {
				t.Helper()
				l, err := st.ListServers(context.Background())
				if err != nil || len(l) != 1 {
					t.Fatalf("servers = %+v, %v; want one", l, err)
				}
				return l[0]
			}
			ctx := context.Background()
			if err := registry("a", "10.0.0.1").Register(ctx); err != nil {
				t.Fatalf("first server: %v", err)
			}
			clk.add(5 * time.Second)
			clone := registry("b", "10.0.0.2")
			err := clone.Register(ctx)
			if !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "set server.name") {
				t.Fatalf("second server under a live name: %v, want a conflict saying to set server.name", err)
			}
			// Run refuses the same way, at once, instead of beating.
			if err := clone.Run(ctx); !errors.Is(err, inventory.ErrConflict) {
				t.Fatalf("Run of the refused server = %v, want the conflict", err)
			}
			if h := held(); h.Addrs[0] != "10.0.0.1" || clk.status(h) != inventory.ServerLive {
				t.Fatalf("after the refusal the row is %+v, want the first server's, live", h)
			}

			// The first server crashed (no stop) and restarts: its row.
			again := registry("a", "10.0.0.1")
			if err := again.Register(ctx); err != nil {
				t.Fatalf("restart under the same instance: %v", err)
			}
			again.stop()
			if h := held(); clk.status(h) != inventory.ServerStopped {
				t.Fatalf("after a clean stop the row is %s, want stopped", clk.status(h))
			}
			if err := registry("b", "10.0.0.2").Register(ctx); err != nil {
				t.Fatalf("second server over a stopped row: %v", err)
			}
			if h := held(); h.Addrs[0] != "10.0.0.2" || clk.status(h) != inventory.ServerLive {
				t.Fatalf("row %+v, want the second server's, live", h)
			}
		})
	}
}

func TestLoadInstanceKeepsOneID(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadInstance(dir)
	if err != nil || len(a) < 20 {
		t.Fatalf("first LoadInstance = %q, %v; want a fresh id", a, err)
	}
	if b, err := LoadInstance(dir); err != nil || b != a {
		t.Fatalf("second LoadInstance = %q, %v; want %q again", b, err, a)
	}
	if c, err := LoadInstance(t.TempDir()); err != nil || c == a {
		t.Fatalf("another directory's instance = %q, %v; want another id than %q", c, err, a)
	}
}
