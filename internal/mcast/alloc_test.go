package mcast

import (
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestMemCacheReadAtDoesNotAllocate: a hit is served from the slots
// allocated up front; a block-device daemon must not wait on reclaim to
// answer the reads reclaim itself may need.
func TestMemCacheReadAtDoesNotAllocate(t *testing.T) {
	c, err := NewMemCache(4*chunkwire.ChunkSize, 4)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range uint32(4) {
		fill(t, c, chunk, make([]byte, chunkwire.ChunkSize))
	}
	p := make([]byte, 64<<10)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.ReadAt(p, 1000); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ReadAt allocates %v times a read, want 0", n)
	}
}

// TestReceiverAllocationsPerChunk: taking a chunk from the group
// allocates nothing, its assembly coming from the Receiver's free list.
func TestReceiverAllocationsPerChunk(t *testing.T) {
	const chunks = 64
	id := chunkwire.ContentID{0xa1}
	r, _ := socketlessReceiver(t, id, chunks, chunks, 0)
	var dgrams [chunks][chunkwire.FragmentsPerChunk][]byte
	payload := make([]byte, chunkwire.FragmentSize)
	for c := range chunks {
		for f := range chunkwire.FragmentsPerChunk {
			d := chunkwire.Data{Content: id, Sender: 1, Seq: uint32(c*chunkwire.FragmentsPerChunk + f), Chunk: uint32(c), Fragment: uint8(f), Payload: payload}
			dgrams[c][f] = d.Append(nil)
		}
	}
	next := 0
	now := time.Unix(1, 0)
	n := testing.AllocsPerRun(chunks-1, func() {
		for _, b := range dgrams[next] {
			r.datagram(b, arrival{at: now})
		}
		next++
	})
	if st := r.Stats(); st.Chunks != chunks || st.Lost != 0 {
		t.Fatalf("took %d chunks, %d lost; want %d, 0", st.Chunks, st.Lost, chunks)
	}
	if n != 0 {
		t.Fatalf("a chunk of 32 datagrams allocates %v times, want 0", n)
	}
}
