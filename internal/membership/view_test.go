package membership

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// table is an in-memory servers table whose reads can fail.
type table struct {
	inventory.Servers
	mu   sync.Mutex
	rows []inventory.ServerInfo
	err  error
}

func (t *table) ListServers(context.Context) ([]inventory.ServerInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.rows), t.err
}

func (t *table) set(rows []inventory.ServerInfo, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows, t.err = rows, err
}

func names(ss []inventory.ServerInfo) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestViewLive(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	c := newClock(t0)
	row := func(name string, age time.Duration) inventory.ServerInfo {
		return inventory.ServerInfo{Name: name, Started: t0.Add(-time.Hour), Heartbeat: t0.Add(-age),
			Addrs: []string{"10.0.0.1", "http://" + name + ":8080"}}
	}
	stopped := row("d", 0)
	stopped.Stopped = t0
	tests := []struct {
		name string
		rows []inventory.ServerInfo
		err  error
		want string
	}{
		{"nothing read: only self", nil, errors.New("no database"), "b"},
		{"stale and stopped left out", []inventory.ServerInfo{row("a", 5*time.Second), row("c", time.Minute), stopped}, nil, "a,b"},
		{"self stale still in", []inventory.ServerInfo{row("a", 0), row("b", time.Hour), row("c", 0)}, nil, "a,b,c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := &table{}
			tab.set(tt.rows, tt.err)
			v := NewView(ViewConfig{Store: tab, Self: "b", Now: c.now})
			v.Refresh(context.Background())
			if got := names(v.Live()); got != tt.want {
				t.Errorf("Live() = %s, want %s", got, tt.want)
			}
		})
	}

	t.Run("a failed read keeps the last picture", func(t *testing.T) {
		tab := &table{}
		tab.set([]inventory.ServerInfo{row("a", 0), row("b", 0)}, nil)
		var logs syncBuf
		v := NewView(ViewConfig{Store: tab, Self: "b", Now: c.now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		v.Refresh(context.Background())
		tab.set(nil, errors.New("connection refused"))
		v.Refresh(context.Background())
		v.Refresh(context.Background())
		if got := names(v.Live()); got != "a,b" {
			t.Errorf("after failed reads Live() = %s, want a,b", got)
		}
		if n := strings.Count(logs.String(), "reading the servers table failed"); n != 1 {
			t.Errorf("logged the outage %d times, want once:\n%s", n, logs.String())
		}
	})

	// A restart (a new start time) is a change too.
	t.Run("a change of the live servers is logged once", func(t *testing.T) {
		tab := &table{}
		var logs syncBuf
		v := NewView(ViewConfig{Store: tab, Self: "b", Now: c.now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		restarted := row("a", 0)
		restarted.Started = t0
		for _, rows := range [][]inventory.ServerInfo{{row("b", 0)}, {row("a", 0), row("b", 0)}, {row("a", 0), row("b", 0)},
			{restarted, row("b", 0)}, {row("a", time.Minute), row("b", 0)}} {
			tab.set(rows, nil)
			v.Refresh(context.Background())
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if _, after, ok := strings.Cut(l, `msg="fleet: live servers changed" servers=`); ok {
				got = append(got, after)
			}
		}
		if want := []string{"b", "a,b", "a,b", "b"}; !slices.Equal(got, want) {
			t.Errorf("logged live servers %q, want %q:\n%s", got, want, logs.String())
		}
	})
}

func TestBaseURL(t *testing.T) {
	for _, tt := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"10.0.0.1", "http://10.0.0.1:8080"}, "http://10.0.0.1:8080"},
		{[]string{"https://b:8443", "http://b:8080"}, "https://b:8443"},
		{[]string{"10.0.0.1"}, ""},
		{nil, ""},
	} {
		if got := BaseURL(inventory.ServerInfo{Addrs: tt.addrs}); got != tt.want {
			t.Errorf("BaseURL(%v) = %q, want %q", tt.addrs, got, tt.want)
		}
	}
}
