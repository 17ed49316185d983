package rootproxy

import (
	"bytes"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// inOrder is every chunk of size bytes, front to back.
func inOrder(size int) []uint32 {
	o := make([]uint32, chunkwire.Chunks(int64(size)))
	for i := range o {
		o[i] = uint32(i)
	}
	return o
}

// oddsThenEvens is an order no sequential read-ahead guesses.
func oddsThenEvens(size int) []uint32 {
	var o []uint32
	n := uint32(chunkwire.Chunks(int64(size)))
	for c := uint32(1); c < n; c += 2 {
		o = append(o, c)
	}
	for c := uint32(0); c < n; c += 2 {
		o = append(o, c)
	}
	return o
}

// readChunks reads the chunks of order, a chunk a read, think apart as a
// booting machine works between its reads, and fails t unless they are
// the base's.
func (r *rig) readChunks(t *testing.T, order []uint32, think time.Duration) {
	t.Helper()
	for _, c := range order {
		time.Sleep(think)
		off := int64(c) * chunkwire.ChunkSize
		got, err := r.k.do(nbd.CmdRead, off, nil, chunkwire.ChunkSize)
		if err != nil {
			t.Fatalf("read chunk %d: %v", c, err)
		}
		if !bytes.Equal(got, r.base[off:off+chunkwire.ChunkSize]) {
			t.Fatalf("read chunk %d: not the base's bytes", c)
		}
	}
}

// TestProxyReadsAheadInTheOrder: a machine that reads as the order says
// has its chunks asked ahead, and uses every one; a machine that stops
// early leaves at most the window unused; without an order nothing is
// asked ahead.
func TestProxyReadsAheadInTheOrder(t *testing.T) {
	const size, k = 4 << 20, 8
	order := oddsThenEvens(size)
	for _, tc := range []struct {
		name      string
		order     []uint32
		reads     int // chunks of order read
		wantAhead bool
	}{
		{"the whole order", order, len(order), true},
		{"a few chunks", order, 4, true},
		{"no order", nil, len(order), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, size, false, tc.order, k)
			r.readChunks(t, order[:tc.reads], time.Millisecond)
			st := r.proxy.Stats()
			t.Logf("read %d chunks: %d asked ahead, %d used; %d miss bytes, %d multicast bytes", tc.reads, st.AheadChunks, st.AheadUsed, st.MissBytes, st.MulticastBytes)
			switch {
			case st.Multicast != "on" || st.UnicastBytes != 0:
				t.Fatalf("stats %+v: want every byte from the group", st)
			case !tc.wantAhead && st.AheadChunks != 0:
				t.Fatalf("%d chunks asked ahead without an order", st.AheadChunks)
			case tc.wantAhead && st.AheadChunks == 0:
				t.Fatal("nothing asked ahead")
			case st.AheadUsed > st.AheadChunks || st.AheadChunks > st.AheadUsed+k:
				t.Fatalf("%d chunks asked ahead, %d used: want at most the window (%d) unused", st.AheadChunks, st.AheadUsed, k)
			case tc.reads == len(order) && st.AheadUsed != st.AheadChunks:
				t.Fatalf("read the whole order: %d chunks asked ahead, %d used, want all", st.AheadChunks, st.AheadUsed)
			case tc.wantAhead && tc.reads == len(order) && st.MissBytes > size/2:
				t.Fatalf("%d of %d bytes missed the cache: the read-ahead did not lead", st.MissBytes, size)
			}
		})
	}
}
