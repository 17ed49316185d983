package mcast

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// BenchmarkReceiverDatagram is the CPU one agent spends on one data
// datagram past the socket: check, assemble, commit. A storm simulator
// that plays N agents in one process pays it N times per datagram.
func BenchmarkReceiverDatagram(b *testing.B) {
	const chunks = 256
	cache, err := NewMemCache(chunks*chunkwire.ChunkSize, 64)
	if err != nil {
		b.Fatal(err)
	}
	id := chunkwire.ContentID{0xbe}
	r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: id, Size: chunks * chunkwire.ChunkSize, Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	r.out = discardRequests{}
	payload := make([]byte, chunkwire.FragmentSize)
	dgrams := make([][]byte, chunks*chunkwire.FragmentsPerChunk)
	for i := range dgrams {
		d := chunkwire.Data{Content: id, Sender: 1, Seq: uint32(i), Chunk: uint32(i / chunkwire.FragmentsPerChunk), Fragment: uint8(i % chunkwire.FragmentsPerChunk), Payload: payload}
		dgrams[i] = d.Append(nil)
	}
	now := time.Unix(1, 0)
	b.SetBytes(chunkwire.FragmentSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.datagram(dgrams[i], arrival{at: now})
		if i++; i == len(dgrams) {
			// Start the content again as a new sender: the cache has
			// evicted most of it, so most chunks are assembled again.
			i = 0
			r.streams = [maxStreams]stream{}
		}
	}
}
