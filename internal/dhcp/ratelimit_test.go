package dhcp

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

func TestClientLimiter(t *testing.T) {
	type step struct {
		after     time.Duration // since the previous step
		mac       net.HardwareAddr
		n         int // packets sent at once
		passed    int // how many of them pass
		firstDrop bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a burst passes, the rest of it is dropped", []step{{mac: macA, n: perClientBurst + 5, passed: perClientBurst, firstDrop: true}}},
		{"one client's flood leaves another alone", []step{
			{mac: macA, n: perClientBurst + 1, passed: perClientBurst, firstDrop: true},
			{mac: macB, n: 4, passed: 4},
		}},
		{"tokens come back at the sustained rate", []step{
			{mac: macA, n: perClientBurst + 1, passed: perClientBurst, firstDrop: true},
			{after: time.Second, mac: macA, n: perClientRate + 1, passed: perClientRate, firstDrop: true},
		}},
		{"the drop is reported once per episode", []step{
			{mac: macA, n: perClientBurst + 1, passed: perClientBurst, firstDrop: true},
			{after: time.Millisecond, mac: macA, n: 3, passed: 0},
		}},
		{"an idle client starts again with a full burst", []step{
			{mac: macA, n: perClientBurst + 1, passed: perClientBurst, firstDrop: true},
			{after: idleForget + time.Second, mac: macA, n: perClientBurst, passed: perClientBurst},
		}},
		{"firmware retransmitting every second never hits it", []step{
			{mac: macA, n: 4, passed: 4}, {after: time.Second, mac: macA, n: 4, passed: 4},
			{after: time.Second, mac: macA, n: 4, passed: 4}, {after: 2 * time.Second, mac: macA, n: 4, passed: 4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l clientLimiter
			now := t0
			for i, s := range tc.steps {
				now = now.Add(s.after)
				passed, firsts := 0, 0
				for range s.n {
					ok, first := l.allow(s.mac, now)
					if ok {
						passed++
					}
					if first {
						firsts++
					}
				}
				if passed != s.passed || (firsts == 1) != s.firstDrop || firsts > 1 {
					t.Fatalf("step %d: %d of %d passed with %d first drops, want %d passed, first drop %v",
						i, passed, s.n, firsts, s.passed, s.firstDrop)
				}
			}
		})
	}
}

// The limit sits in front of the policy: a flooding client's extra
// DISCOVERs get no offer and one warning names it, while others are served.
func TestFloodingClientDropped(t *testing.T) {
	var logs bytes.Buffer
	ts := newTestServer(t, ModeFull, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	offers := 0
	for range perClientBurst + 10 {
		r, why := ts.send(t, discover(t, macA, fwOVMF), false)
		if r.msg != nil {
			offers++
		} else if why != "client over its rate limit" {
			t.Fatalf("DISCOVER dropped for %q, want the rate limit", why)
		}
	}
	if offers != perClientBurst {
		t.Errorf("%d offers to a client sending %d DISCOVERs at once, want %d", offers, perClientBurst+10, perClientBurst)
	}
	if r, why := ts.send(t, discover(t, macB, fwOVMF), false); r.msg == nil {
		t.Errorf("another client got no offer while the first flooded: %s", why)
	}
	if n := strings.Count(logs.String(), "dhcp client sends too fast"); n != 1 || !strings.Contains(logs.String(), "mac="+macA.String()) {
		t.Errorf("%d flood warnings (want 1, naming %s):\n%s", n, macA, logs.String())
	}
	ts.clock.t = ts.clock.t.Add(time.Second)
	if r, why := ts.send(t, discover(t, macA, fwOVMF), false); r.msg == nil {
		t.Errorf("no offer a second after the flood: %s", why)
	}
}
