package admission

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

func TestLimiter(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	l := New(3, 2, slog.New(slog.NewTextHandler(logs, nil)), "things turned away")
	type step struct {
		host string
		ok   bool
	}
	var releases []func()
	for i, s := range []step{{"a", true}, {"a", true}, {"a", false}, {"b", true}, {"c", false}} {
		r, ok := l.Admit(s.host)
		if ok != s.ok {
			t.Fatalf("step %d: Admit(%q) = %v, want %v", i, s.host, ok, s.ok)
		}
		if ok {
			releases = append(releases, r)
		}
	}
	if total, a := l.Count("a"); total != 3 || a != 2 {
		t.Errorf("Count = %d, %d; want 3, 2", total, a)
	}
	releases[0]()
	releases[0]() // a second release gives nothing back twice
	if total, a := l.Count("a"); total != 2 || a != 1 {
		t.Errorf("after one release: Count = %d, %d; want 2, 1", total, a)
	}
	if _, ok := l.Admit("c"); !ok {
		t.Error("c still turned away after a slot freed")
	}
	if got := l.Refused(); got != 2 {
		t.Errorf("Refused = %d, want 2", got)
	}
	// Two refusals within a second: one log line.
	if n := strings.Count(logs.String(), "things turned away"); n != 1 {
		t.Errorf("%d log lines for 2 refusals in a second, want 1:\n%s", n, logs)
	}
}

func TestHostOf(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 69}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 10809}, "fd00::1"},
		{&net.UnixAddr{Name: "/run/x", Net: "unix"}, "/run/x"},
	} {
		if got := HostOf(tc.addr); got != tc.want {
			t.Errorf("HostOf(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
