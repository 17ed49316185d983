package mcast

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestHubFansOut: a Hub hands every datagram of its socket to each
// Receiver built with it, and none to one that has closed.
func TestHubFansOut(t *testing.T) {
	content := chunkwire.ContentID{7}
	chunk := bytes.Repeat([]byte{0xb5}, chunkwire.ChunkSize)
	for _, tc := range []struct {
		name   string
		rcvs   int
		closed int // of them closed before the chunk is sent
	}{
		{"one receiver", 1, 0},
		{"many receivers", 16, 0},
		{"a closed receiver gets nothing", 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.SetReadBuffer(4 << 20); err != nil {
				t.Fatal(err)
			}
			h := newHub(conn, 4<<20)
			defer h.Close()
			var caches []*MemCache
			for i := range tc.rcvs {
				cache, err := NewMemCache(2*chunkwire.ChunkSize, 2)
				if err != nil {
					t.Fatal(err)
				}
				r := hubReceiver(t, h, cache, content, 2*chunkwire.ChunkSize)
				h.add(r)
				if i < tc.closed {
					r.Close()
				}
				caches = append(caches, cache)
			}
			go h.Run()

			out, err := net.DialUDP("udp4", nil, conn.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			for _, b := range chunkDatagrams(content, 0, chunk) {
				if _, err := out.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for i, c := range caches {
				want := i >= tc.closed
				for want && !c.Has(0) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if c.Has(0) != want {
					t.Errorf("receiver %d holds the chunk: %v, want %v", i, c.Has(0), want)
				}
				got := make([]byte, chunkwire.ChunkSize)
				if want {
					if _, err := c.ReadAt(got, 0); err != nil || !bytes.Equal(got, chunk) {
						t.Errorf("receiver %d: chunk read back %v (err %v), want the sent bytes", i, got[:4], err)
					}
				}
			}
		})
	}
}

// hubReceiver is a Receiver of content (size bytes) on h with cache,
// wanting chunk 0, its requests discarded.
func hubReceiver(t *testing.T, h *Hub, cache Cache, content chunkwire.ContentID, size int64) *Receiver {
	t.Helper()
	r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: content,
		Size: size, Cache: cache, Hub: h})
	if err != nil {
		t.Fatal(err)
	}
	r.out = discardRequests{}
	r.mu.Lock()
	r.want(0, 1, time.Now())
	r.mu.Unlock()
	return r
}

// chunkDatagrams returns the datagrams of chunk of content, its bytes.
func chunkDatagrams(content chunkwire.ContentID, chunk uint32, bytes []byte) [][]byte {
	var out [][]byte
	for f := range chunkwire.FragmentsPerChunk {
		d := chunkwire.Data{Content: content, Sender: 1, Seq: chunk*chunkwire.FragmentsPerChunk + uint32(f), Chunk: chunk, Fragment: uint8(f),
			Payload: bytes[f*chunkwire.FragmentSize : (f+1)*chunkwire.FragmentSize]}
		if f == chunkwire.FragmentsPerChunk-1 {
			d.Flags = chunkwire.FlagEnd
		}
		out = append(out, d.Append(nil))
	}
	return out
}

// TestHubDeliver: the Hub checks each datagram once and every Receiver
// takes the parsed datagram as it would one from its own socket: each
// counts and commits every chunk for itself, none takes a datagram whose
// checksum is wrong, and the bytes read back are the sent ones.
func TestHubDeliver(t *testing.T) {
	const size = 2 * chunkwire.ChunkSize
	content := chunkwire.ContentID{9}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var dgrams [][]byte
	for c := range uint32(2) {
		dgrams = append(dgrams, chunkDatagrams(content, c, data[c*chunkwire.ChunkSize:])...)
	}
	corrupt := append([]byte(nil), dgrams[3]...)
	corrupt[len(corrupt)-1] ^= 0xff
	for _, tc := range []struct {
		name   string
		rcvs   int
		hub    bool // through a Hub on a SharedSlab; else each its own socket path
		first  [][]byte
		wantDg uint64
	}{
		{"200 receivers on a hub", 200, true, nil, 2 * chunkwire.FragmentsPerChunk},
		{"a corrupt datagram reaches none", 16, true, [][]byte{corrupt}, 2 * chunkwire.FragmentsPerChunk},
		{"own sockets take the same", 16, false, [][]byte{corrupt}, 2 * chunkwire.FragmentsPerChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(nil, 0)
			var rcvs []*Receiver
			var caches []*MemCache
			for range tc.rcvs {
				cache, err := NewMemCache(size, 2)
				if tc.hub {
					cache, err = NewMemCacheOn(h.Slab(size), size, 2)
				}
				if err != nil {
					t.Fatal(err)
				}
				r := hubReceiver(t, h, cache, content, size)
				if tc.hub {
					h.add(r)
				}
				rcvs, caches = append(rcvs, r), append(caches, cache)
			}
			now := arrival{at: time.Now()}
			for _, b := range append(tc.first, dgrams...) {
				if tc.hub {
					h.deliver([]parsed{parse(b, now)})
					continue
				}
				for _, r := range rcvs {
					r.datagram(b, now)
				}
			}
			got := make([]byte, size)
			for i, r := range rcvs {
				st := r.Stats()
				if st.Datagrams != tc.wantDg || st.Chunks != 2 || st.Duplicates != 0 {
					t.Fatalf("receiver %d: %d datagrams, %d chunks, %d duplicates; want %d, 2, 0", i, st.Datagrams, st.Chunks, st.Duplicates, tc.wantDg)
				}
				if _, err := caches[i].ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("receiver %d: read back err %v, equal %v; want the sent bytes", i, err, bytes.Equal(got, data))
				}
			}
		})
	}
}

// TestSharedSlabWritesOnce: a fragment a SharedSlab already holds is not
// written again, yet each cache on it counts the fragment and commits the
// chunk for itself; a cache of its own on the same Hub gets every byte.
func TestSharedSlabWritesOnce(t *testing.T) {
	const size = chunkwire.ChunkSize
	content := chunkwire.ContentID{5}
	data := bytes.Repeat([]byte{0x3c}, size)
	h := newHub(nil, 0)
	slab := h.Slab(size)
	onSlab := func() *MemCache {
		c, err := NewMemCacheOn(slab, size, 1)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := onSlab()
	h.add(hubReceiver(t, h, first, content, size))
	for _, b := range chunkDatagrams(content, 0, data) {
		h.deliver([]parsed{parse(b, arrival{at: time.Now()})})
	}
	if !first.Has(0) {
		t.Fatal("the first cache did not commit the chunk")
	}
	// Were the second receiver to write the fragment, the mark would go.
	mark := bytes.Repeat([]byte{0xee}, chunkwire.FragmentSize)
	copy(slab.chunk(0), mark)
	second, own := onSlab(), mustMemCache(t, size)
	h.rcvs.Store(&[]*Receiver{hubReceiver(t, h, second, content, size), hubReceiver(t, h, own, content, size)})
	for _, b := range chunkDatagrams(content, 0, data) {
		h.deliver([]parsed{parse(b, arrival{at: time.Now()})})
	}
	got := make([]byte, chunkwire.FragmentSize)
	for _, tc := range []struct {
		name string
		c    *MemCache
		want []byte
	}{
		{"a cache on the slab commits without writing", second, mark},
		{"a cache of its own gets the bytes", own, data[:chunkwire.FragmentSize]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.c.Has(0) {
				t.Fatal("chunk not committed")
			}
			if _, err := tc.c.ReadAt(got, 0); err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("read %x (err %v), want %x", got[:4], err, tc.want[:4])
			}
		})
	}
}

func mustMemCache(t *testing.T, size int64) *MemCache {
	t.Helper()
	c, err := NewMemCache(size, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHubDeliverBusyLast: a Receiver whose lock is held (its machine
// reading) does not hold up the others; it gets the batch once free, its
// datagrams in order.
func TestHubDeliverBusyLast(t *testing.T) {
	const size = chunkwire.ChunkSize
	content := chunkwire.ContentID{6}
	data := bytes.Repeat([]byte{0x5a}, size)
	h := newHub(nil, 0)
	free, busy := hubReceiver(t, h, mustMemCache(t, size), content, size), hubReceiver(t, h, mustMemCache(t, size), content, size)
	h.add(busy)
	h.add(free)
	var batch []parsed
	for _, b := range chunkDatagrams(content, 0, data) {
		batch = append(batch, parse(b, arrival{at: time.Now()}))
	}
	busy.mu.Lock()
	done := make(chan struct{})
	go func() { defer close(done); h.deliver(batch) }()
	deadline := time.Now().Add(5 * time.Second)
	for free.Stats().Chunks == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := free.Stats().Chunks; got != 1 {
		t.Fatalf("the free receiver committed %d chunks while the other was busy, want 1", got)
	}
	select {
	case <-done:
		t.Fatal("deliver returned before the busy receiver had the batch")
	default:
	}
	busy.mu.Unlock()
	<-done
	if st := busy.Stats(); st.Chunks != 1 || st.Lost != 0 || st.Datagrams != chunkwire.FragmentsPerChunk {
		t.Fatalf("the busy receiver: %d chunks, %d lost, %d datagrams; want 1, 0, %d", st.Chunks, st.Lost, st.Datagrams, chunkwire.FragmentsPerChunk)
	}
}
