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
			h := &Hub{conn: conn, rcvs: map[*Receiver]struct{}{}}
			defer h.Close()
			var caches []*MemCache
			for i := range tc.rcvs {
				cache, err := NewMemCache(2*chunkwire.ChunkSize, 2)
				if err != nil {
					t.Fatal(err)
				}
				r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: content,
					Size: 2 * chunkwire.ChunkSize, Cache: cache, Hub: h})
				if err != nil {
					t.Fatal(err)
				}
				r.out = discardRequests{}
				r.mu.Lock()
				r.want(0, 1, time.Now())
				r.mu.Unlock()
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
			var b []byte
			for f := range chunkwire.FragmentsPerChunk {
				d := chunkwire.Data{Content: content, Sender: 1, Seq: uint32(f), Fragment: uint8(f),
					Payload: chunk[f*chunkwire.FragmentSize : (f+1)*chunkwire.FragmentSize]}
				if f == chunkwire.FragmentsPerChunk-1 {
					d.Flags = chunkwire.FlagEnd
				}
				b = d.Append(b[:0])
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
