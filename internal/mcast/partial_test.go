package mcast

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// recordRequests keeps the requests a receiver sends.
type recordRequests struct{ got []chunkwire.Request }

func (w *recordRequests) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) {
	req, err := chunkwire.ParseRequest(b, nil)
	if err != nil {
		return 0, err
	}
	w.got = append(w.got, req)
	return len(b), nil
}

// partialRig is a receiver of a content of chunks chunks, MaxPending
// pending, that sends its requests to a recordRequests.
func partialRig(t *testing.T, chunks, pending int) (*Receiver, *recordRequests) {
	t.Helper()
	cache, err := NewMemCache(int64(chunks)*chunkwire.ChunkSize, chunks)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: chunkwire.ContentID{2},
		Size: int64(chunks) * chunkwire.ChunkSize, Cache: cache, MaxPending: pending})
	if err != nil {
		t.Fatal(err)
	}
	w := &recordRequests{}
	r.out = w
	return r, w
}

// feed gives r the fragments of chunk but those in skip, at now.
func feed(r *Receiver, seq *uint32, chunk uint32, now time.Time, skip ...uint8) {
	payload := make([]byte, chunkwire.FragmentSize)
next:
	for f := range uint8(chunkwire.FragmentsPerChunk) {
		*seq++
		for _, s := range skip {
			if s == f {
				continue next
			}
		}
		d := chunkwire.Data{Content: chunkwire.ContentID{2}, Sender: 1, Seq: *seq, Chunk: chunk, Fragment: f, Payload: payload}
		r.datagram(d.Append(nil), arrival{at: now})
	}
}

// TestPartialChunkAsksOnlyForWhatWasLost: a chunk other agents asked for
// arrives with two fragments lost here. Seconds later this machine wants
// it: it asks for the two fragments, not the whole chunk again, which a
// storm's receivers that each lose a little would otherwise make the
// server send once per receiver.
func TestPartialChunkAsksOnlyForWhatWasLost(t *testing.T) {
	r, w := partialRig(t, 8, 8)
	start := time.Unix(100, 0)
	var seq uint32
	feed(r, &seq, 3, start, 5, 17)
	feed(r, &seq, 4, start) // the sender moved on: chunk 3 is as complete as it gets
	for d := time.Duration(0); d <= 5*time.Second; d += 25 * time.Millisecond {
		r.tick(start.Add(d))
	}
	if len(w.got) != 0 {
		t.Fatalf("requests before the chunk was wanted: %+v", w.got)
	}
	r.mu.Lock()
	r.want(3, 1, start.Add(5*time.Second))
	r.mu.Unlock()
	if len(w.got) != 1 || len(w.got[0].Ranges) != 1 {
		t.Fatalf("requests %+v, want one with one range", w.got)
	}
	if got, want := w.got[0].Ranges[0], (chunkwire.Range{First: 3, Count: 1, Mask: 1<<5 | 1<<17}); got != want {
		t.Fatalf("asked for %+v, want only the lost fragments %+v", got, want)
	}
	if !r.cfg.Cache.Has(4) || r.cfg.Cache.Has(3) {
		t.Fatalf("cache has chunk 4 %v, 3 %v; want 4 complete and 3 not", r.cfg.Cache.Has(4), r.cfg.Cache.Has(3))
	}
}

// TestPartialChunksGiveWayToWantedOnes: with MaxPending held by partial
// chunks nobody here asked for, a chunk this machine wants, or a new one
// arriving, takes the place of the one that progressed longest ago; a
// chunk this machine wants is never dropped for another.
func TestPartialChunksGiveWayToWantedOnes(t *testing.T) {
	r, w := partialRig(t, 8, 2)
	start := time.Unix(100, 0)
	var seq uint32
	feed(r, &seq, 0, start, 1)
	feed(r, &seq, 1, start.Add(time.Second), 1)
	r.mu.Lock()
	r.want(5, 1, start.Add(2*time.Second))
	_, kept0 := r.pend[0]
	_, kept1 := r.pend[1]
	r.mu.Unlock()
	if kept0 || !kept1 || len(w.got) != 1 || w.got[0].Ranges[0].First != 5 {
		t.Fatalf("after wanting 5 with 0 and 1 partial: 0 kept %v, 1 kept %v, requests %+v; want 0 dropped, 1 kept, 5 asked for", kept0, kept1, w.got)
	}
	feed(r, &seq, 6, start.Add(3*time.Second), 2) // takes 1's place
	r.mu.Lock()
	r.want(7, 1, start.Add(4*time.Second)) // 5 and 6: 6 goes, 5 is wanted
	_, kept5 := r.pend[5]
	_, kept6 := r.pend[6]
	_, kept7 := r.pend[7]
	r.mu.Unlock()
	if !kept5 || kept6 || !kept7 {
		t.Fatalf("pending 5 %v, 6 %v, 7 %v; want the wanted 5 and 7 kept and 6 dropped", kept5, kept6, kept7)
	}
	r.mu.Lock()
	r.want(2, 1, start.Add(5*time.Second)) // both held are wanted: no room
	_, kept2 := r.pend[2]
	r.mu.Unlock()
	if kept2 {
		t.Fatal("a third wanted chunk took the place of a wanted one")
	}
}
