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
	id := chunkwire.ContentID{0xbe}
	r, _ := socketlessReceiver(b, id, chunks, 64, 0)
	dgrams := contentDatagrams(id, chunks)
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

// BenchmarkHubDeliver is the CPU bootfleet storm's Hub spends on a batch
// of hubBatch data datagrams for 200 Receivers whose caches share a SharedSlab: the rate
// at which one core can play 200 machines' group.
func BenchmarkHubDeliver(b *testing.B) {
	const chunks, rcvs = 256, 200
	const size = chunks * chunkwire.ChunkSize
	id := chunkwire.ContentID{0xbe}
	h := newHub(nil, 0)
	for range rcvs {
		cache, err := NewMemCacheOn(h.Slab(size), size, 64)
		if err != nil {
			b.Fatal(err)
		}
		r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: id, Size: size, Cache: cache, Hub: h})
		if err != nil {
			b.Fatal(err)
		}
		r.out = discardRequests{}
		h.add(r)
	}
	dgrams := contentDatagrams(id, chunks)
	// Batches of hubBatch, as Run reads them when the group keeps up.
	now := time.Unix(1, 0)
	batches := make([][]parsed, len(dgrams)/hubBatch)
	for i := range batches {
		for _, d := range dgrams[i*hubBatch : (i+1)*hubBatch] {
			batches[i] = append(batches[i], parse(d, arrival{at: now}))
		}
	}
	b.SetBytes(hubBatch * chunkwire.FragmentSize)
	i := 0
	for b.Loop() {
		h.deliver(batches[i])
		if i++; i == len(batches) {
			i = 0
			for _, r := range *h.rcvs.Load() {
				r.streams = [maxStreams]stream{}
			}
		}
	}
}

// contentDatagrams is every data datagram of a content of chunks chunks
// from sender 1, in order.
func contentDatagrams(id chunkwire.ContentID, chunks int) [][]byte {
	payload := make([]byte, chunkwire.FragmentSize)
	dgrams := make([][]byte, chunks*chunkwire.FragmentsPerChunk)
	for i := range dgrams {
		d := chunkwire.Data{Content: id, Sender: 1, Seq: uint32(i), Chunk: uint32(i / chunkwire.FragmentsPerChunk), Fragment: uint8(i % chunkwire.FragmentsPerChunk), Payload: payload}
		dgrams[i] = d.Append(nil)
	}
	return dgrams
}
