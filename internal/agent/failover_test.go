package agent

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

func TestRotation(t *testing.T) {
	type step struct {
		i    int
		wait time.Duration
	}
	for _, tc := range []struct {
		name      string
		n, failed int
		want      []step
	}{
		{"one server: every retry waits, doubling to the cap", 1, 0, []step{
			{0, 0}, {0, 250 * time.Millisecond}, {0, 500 * time.Millisecond}, {0, time.Second},
			{0, 2 * time.Second}, {0, 4 * time.Second}, {0, 5 * time.Second}, {0, 5 * time.Second}}},
		{"three servers, the first failed: the next at once, the failed one last", 3, 0, []step{
			{1, 0}, {2, 0}, {0, 0}, {1, 250 * time.Millisecond}, {2, 0}, {0, 0}, {1, 500 * time.Millisecond}}},
		{"three servers, the last failed: wraps to the first", 3, 2, []step{
			{0, 0}, {1, 0}, {2, 0}, {0, 250 * time.Millisecond}}},
		{"no servers is one", 0, 0, []step{{0, 0}, {0, 250 * time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRotation(tc.n, tc.failed)
			for k, w := range tc.want {
				i, wait := r.next()
				if i != w.i || wait != w.wait {
					t.Fatalf("attempt %d: server %d after %v, want server %d after %v", k+1, i, wait, w.i, w.wait)
				}
			}
		})
	}
}

func TestMilestonesAt(t *testing.T) {
	for _, tc := range []struct {
		base string
		to   rootarg.Server
		want string
	}{
		{"http://10.0.0.1:8080/milestone/52-54-00-00-00-01", rootarg.Server{Host: "10.0.0.2", Port: 10809}, "http://10.0.0.2:8080/milestone/52-54-00-00-00-01"},
		{"http://10.0.0.1/milestone/m", rootarg.Server{Host: "10.0.0.2", Port: 10809}, "http://10.0.0.2/milestone/m"},
		{"http://[fd00::1]:8080/milestone/m", rootarg.Server{Host: "fd00::2", Port: 1}, "http://[fd00::2]:8080/milestone/m"},
		{"http://10.0.0.1/milestone/m", rootarg.Server{Host: "fd00::2", Port: 1}, "http://[fd00::2]/milestone/m"},
		{"http://%zz", rootarg.Server{Host: "10.0.0.2", Port: 1}, "http://%zz"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			if got := milestonesAt(tc.base, tc.to); got != tc.want {
				t.Errorf("milestonesAt(%q, %v) = %q, want %q", tc.base, tc.to, got, tc.want)
			}
		})
	}
}

func TestReconnectReport(t *testing.T) {
	export := "m-52-54-00-00-00-01-0123456789abcdef0123456789abcdef"
	got := reconnectReport("http://10.0.0.1:8080/milestone/52-54-00-00-00-01", rootarg.Server{Host: "10.0.0.2", Port: 10809}, rootarg.Server{Host: "10.0.0.1", Port: 10809},
		export, 1234567*time.Microsecond)
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "10.0.0.2:8080" || u.Path != "/milestone/52-54-00-00-00-01/nbd-reconnected-1234ms" {
		t.Errorf("report URL %q: want the milestone nbd-reconnected-1234ms on the new server", got)
	}
	q := u.Query()
	if q.Get("from") != "10.0.0.1:10809" || q.Get("after_ms") != "1234" || q.Get("export") != "m-52-54-00-00-00-01-0123…" {
		t.Errorf("report query %v: want from, after_ms and the export's label", q)
	}
	if strings.Contains(got, "456789abcdef") {
		t.Errorf("report URL %q carries the export's secret", got)
	}
	if n := len(reconnectMilestone(24 * time.Hour)); n > 40 {
		t.Errorf("a day's reconnect milestone is %d characters; the server takes 40", n)
	}
}
