package mcast

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestSilenceIsNotAStall: a receiver waits on a chunk and nothing
// arrives. Ticks that come on time give the group up after Silence; a
// tick that comes seconds late (this process was not running) or finds
// datagrams waiting unread in the socket does not: the group may have
// sent what the receiver has not yet read.
func TestSilenceIsNotAStall(t *testing.T) {
	const silence = 2 * time.Second
	const period = 25 * time.Millisecond // RepairAfter/2 with the default
	cases := []struct {
		name     string
		ticks    []time.Duration // since the chunk was wanted
		queued   int
		wantGone bool
	}{
		{"ticks on time", steady(0, silence+period), 0, true},
		{"a stall past the silence", append(steady(0, time.Second), 3*time.Second, 3*time.Second+period), 0, false},
		{"the silence after a stall", append(steady(0, time.Second), append([]time.Duration{3 * time.Second}, steady(3*time.Second+period, 5*time.Second+period)...)...), 0, true},
		{"datagrams waiting unread", steady(0, silence+period), 1400, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache, err := NewMemCache(4*chunkwire.ChunkSize, 4)
			if err != nil {
				t.Fatal(err)
			}
			r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: chunkwire.ContentID{1}, Size: 4 * chunkwire.ChunkSize, Cache: cache, Silence: silence})
			if err != nil {
				t.Fatal(err)
			}
			r.out = discardRequests{}
			r.queued = func() int { return c.queued }
			start := time.Unix(100, 0)
			r.mu.Lock()
			r.want(0, 1, start)
			r.mu.Unlock()
			for _, d := range c.ticks {
				r.tick(start.Add(d))
			}
			if st := r.Stats(); st.Silent != c.wantGone {
				t.Fatalf("after ticks up to %v: silent %v, want %v", c.ticks[len(c.ticks)-1], st.Silent, c.wantGone)
			}
		})
	}
}

// steady is ticks one period apart from from to to, inclusive.
func steady(from, to time.Duration) []time.Duration {
	var ts []time.Duration
	for d := from; d <= to; d += 25 * time.Millisecond {
		ts = append(ts, d)
	}
	return ts
}
