package mcast

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// FuzzReceiverDatagrams feeds a receiver the datagrams anyone on the
// segment could send: the input is a series of 2-byte lengths and
// datagrams, each also tried with the content id and CRC made right so
// that the fuzzer reaches assembly and repair. Whatever arrives, the
// receiver must not panic, must keep within MaxPending, and must commit
// only chunks of the content with every fragment in.
func FuzzReceiverDatagrams(f *testing.F) {
	const size = fuzzSize
	id := fuzzID
	frame := func(ds ...chunkwire.Data) []byte {
		var out []byte
		for _, d := range ds {
			d.Content = id
			b := d.Append(nil)
			out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
			out = append(out, b...)
		}
		return out
	}
	full := make([]byte, chunkwire.FragmentSize)
	f.Add(frame(chunkwire.Data{Sender: 1, Seq: 1, Chunk: 0, Payload: full}, chunkwire.Data{Sender: 1, Seq: 5, Chunk: 1, Fragment: 3, Flags: chunkwire.FlagEnd, Payload: full}))
	f.Add(frame(chunkwire.Data{Sender: 2, Seq: 1 << 31, Chunk: 3, Payload: full}, chunkwire.Data{Sender: 2, Seq: 1<<31 + 1, Chunk: 3, Fragment: 1, Payload: make([]byte, 476)}))
	f.Add(frame(chunkwire.Data{Sender: 3, Chunk: 9, Payload: full}))
	f.Fuzz(fuzzReceiver)
}

// The content the fuzzed receiver receives.
const fuzzSize = 3*chunkwire.ChunkSize + 1500

var fuzzID = chunkwire.ContentID{0xf0}

func fuzzReceiver(t *testing.T, in []byte) {
	const size = fuzzSize
	id := fuzzID
	{
		cache, err := NewMemCache(size, 2)
		if err != nil {
			t.Fatal(err)
		}
		r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: id, Size: size, Cache: cache, MaxPending: 2})
		if err != nil {
			t.Fatal(err)
		}
		r.out = discardRequests{}
		r.Want(0, 2) // so that repairs run too
		now := time.Unix(1000, 0)
		for len(in) >= 2 {
			n := int(binary.BigEndian.Uint16(in))
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			b := in[:n]
			in = in[n:]
			now = now.Add(time.Millisecond)
			r.datagram(b, arrival{at: now})
			if len(b) >= chunkwire.HeaderLen {
				fixed := append([]byte(nil), b...)
				copy(fixed[8:16], id[:])
				r.datagram(chunkwire.Seal(fixed), arrival{at: now})
			}
			r.tick(now)
			if len(r.pend) > r.cfg.MaxPending {
				t.Fatalf("%d chunks pending, MaxPending %d", len(r.pend), r.cfg.MaxPending)
			}
		}
		st := r.Stats()
		if st.Chunks > uint64(chunkwire.Chunks(size))*8 || st.Bytes > st.Datagrams*chunkwire.FragmentSize {
			t.Fatalf("stats out of bounds: %+v", st)
		}
		for c := range chunkwire.Chunks(size) + 2 {
			if cache.Has(c) && c >= chunkwire.Chunks(size) {
				t.Fatalf("chunk %d past the content was committed", c)
			}
		}
	}
}

type discardRequests struct{}

// socketlessReceiver is a Receiver of chunks chunks of content id, into a
// MemCache of slots slots, with no sockets: datagrams are handed to it,
// and its requests go nowhere. maxPending 0 takes the default.
func socketlessReceiver(tb testing.TB, id chunkwire.ContentID, chunks, slots, maxPending int) (*Receiver, *MemCache) {
	tb.Helper()
	cache, err := NewMemCache(int64(chunks)*chunkwire.ChunkSize, slots)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: id, Size: int64(chunks) * chunkwire.ChunkSize,
		Cache: cache, MaxPending: maxPending})
	if err != nil {
		tb.Fatal(err)
	}
	r.out = discardRequests{}
	return r, cache
}

func (discardRequests) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) {
	return len(b), nil
}
