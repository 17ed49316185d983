package mcast

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// feedAt gives r the fragments from..to-1 of chunk, arrived at at.
func feedAt(r *Receiver, seq *uint32, chunk uint32, at time.Time, from, to uint8) {
	payload := make([]byte, chunkwire.FragmentSize)
	for f := from; f < to; f++ {
		*seq++
		d := chunkwire.Data{Content: chunkwire.ContentID{2}, Sender: 1, Seq: *seq, Chunk: chunk, Fragment: f, Payload: payload}
		r.datagram(d.Append(nil), arrival{at: at})
	}
}

// TestBacklogIsNotLoss: a receiver that reads its socket late must not
// ask for what waits unread in it, which would make the server send it
// again to every machine. It asks once what arrived before it wanted a
// chunk has been read, and repairs only what has not arrived by then.
func TestBacklogIsNotLoss(t *testing.T) {
	const all = chunkwire.FragmentsPerChunk
	ms := time.Millisecond
	start := time.Unix(100, 0)
	type step struct {
		at      time.Duration // since start: a tick, or when fed datagrams arrived
		queued  int           // unread bytes the socket reports from now on
		want    int           // chunk to want, -1 for none
		feed    int           // chunk to feed fragments from..to of, -1 for none
		from    uint8
		to      uint8
		tick    bool
		reqWant []chunkwire.Range // the ranges of every request sent up to this step
	}
	none := []chunkwire.Range{}
	cases := []struct {
		name  string
		steps []step
	}{
		{"the wanted chunk waited unread", []step{
			{at: 0, queued: 1, want: 0, feed: -1, reqWant: none},
			{at: -10 * ms, queued: 1, want: -1, feed: 0, from: 0, to: all, reqWant: none},
			{at: 200 * ms, queued: 0, want: -1, feed: -1, tick: true, reqWant: none},
		}},
		{"the backlog did not hold it", []step{
			{at: 0, queued: 1, want: 1, feed: -1, reqWant: none},
			{at: -10 * ms, queued: 1, want: -1, feed: 0, from: 0, to: all, reqWant: none},
			{at: 25 * ms, queued: 0, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{{First: 1, Count: 1, Mask: chunkwire.AllFragments}}},
		}},
		{"a datagram that arrived after the want releases it", []step{
			{at: 0, queued: 1, want: 1, feed: -1, reqWant: none},
			{at: 5 * ms, queued: 1, want: -1, feed: 2, from: 0, to: 1, reqWant: []chunkwire.Range{{First: 1, Count: 1, Mask: chunkwire.AllFragments}}},
		}},
		{"a partial chunk's rest waited unread", []step{
			{at: 0, queued: 0, want: 3, feed: -1, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 5 * ms, queued: 1, want: -1, feed: 3, from: 0, to: 16, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 300 * ms, queued: 1, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 2 * time.Second, queued: 1, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 6 * ms, queued: 0, want: -1, feed: 3, from: 16, to: all, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 3 * time.Second, queued: 0, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
		}},
		{"what never arrived is repaired once all was read", []step{
			{at: 0, queued: 0, want: 3, feed: -1, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 5 * ms, queued: 1, want: -1, feed: 3, from: 0, to: 16, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 300 * ms, queued: 1, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{{First: 3, Count: 1, Mask: chunkwire.AllFragments}}},
			{at: 325 * ms, queued: 0, want: -1, feed: -1, tick: true, reqWant: []chunkwire.Range{
				{First: 3, Count: 1, Mask: chunkwire.AllFragments}, {First: 3, Count: 1, Mask: chunkwire.AllFragments &^ (1<<16 - 1)}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, w := partialRig(t, 8, 8)
			queued := 0
			r.queued = func() int { return queued }
			var seq uint32
			for i, s := range c.steps {
				queued = s.queued
				now := start.Add(s.at)
				if s.want >= 0 {
					r.mu.Lock()
					r.want(uint32(s.want), 1, now)
					r.mu.Unlock()
				}
				if s.feed >= 0 {
					feedAt(r, &seq, uint32(s.feed), now, s.from, s.to)
				}
				if s.tick {
					r.tick(now)
				}
				var got []chunkwire.Range
				for _, q := range w.got {
					got = append(got, q.Ranges...)
				}
				if len(got) != len(s.reqWant) {
					t.Fatalf("step %d: requests %+v, want %+v", i, got, s.reqWant)
				}
				for j := range got {
					if got[j] != s.reqWant[j] {
						t.Fatalf("step %d: requests %+v, want %+v", i, got, s.reqWant)
					}
				}
			}
		})
	}
}

// TestOverflowCountsTheSocketsDrops: the socket's drop count, carried by
// each datagram, adds what it grew by to Overflow, across its wrap, and
// a datagram of another content still carries it.
func TestOverflowCountsTheSocketsDrops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dropped []uint32 // the count carried by each datagram in turn
		want    uint64
	}{
		{"none", []uint32{0, 0, 0}, 0},
		{"one burst", []uint32{0, 0, 40, 40}, 40},
		{"two bursts", []uint32{0, 5, 5, 12}, 12},
		{"across the wrap", []uint32{1<<32 - 3, 2}, 1<<32 - 3 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache, err := NewMemCache(4*chunkwire.ChunkSize, 4)
			if err != nil {
				t.Fatal(err)
			}
			r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: chunkwire.ContentID{2}, Size: 4 * chunkwire.ChunkSize, Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			r.out = &recordRequests{}
			for i, n := range tc.dropped {
				d := chunkwire.Data{Content: chunkwire.ContentID{byte(2 + i%2)}, Sender: 1, Seq: uint32(i + 1), Chunk: 0, Fragment: 0, Payload: make([]byte, chunkwire.FragmentSize)}
				r.datagram(d.Append(nil), arrival{at: time.Unix(100, 0), dropped: n})
			}
			if got := r.Stats().Overflow; got != tc.want {
				t.Fatalf("overflow %d after drop counts %v, want %d", got, tc.dropped, tc.want)
			}
		})
	}
}
