package mcast

import (
	"net"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// wrappedConn hides the *net.UDPConn, so a batch takes one WriteTo per
// datagram.
type wrappedConn struct{ net.PacketConn }

// TestBatchSends: a batch sends its datagrams in order, by sendmmsg on a
// UDP socket and by WriteTo on any other conn, reports what went out,
// and reports each datagram a socket refuses without stopping.
func TestBatchSends(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  bool
		batch bool
	}{
		{"sendmmsg on a UDP socket", false, true},
		{"WriteTo on another conn", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer rx.Close()
			tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			var conn net.PacketConn = tx
			if tc.wrap {
				conn = wrappedConn{tx}
			}
			b := NewBatch(conn, 4, chunkwire.MaxDataLen)
			if got := b.pc != nil; got != tc.batch {
				t.Fatalf("batch uses sendmmsg: %v, want %v", got, tc.batch)
			}
			to := rx.LocalAddr().(*net.UDPAddr)
			payload := make([]byte, chunkwire.FragmentSize)
			var sent, calls int
			var bytes uint64
			report := func(n int, by uint64, err error) {
				if err != nil {
					t.Fatalf("send to loopback: %v", err)
				}
				sent, bytes, calls = sent+n, bytes+by, calls+1
			}
			for f := range 6 {
				d := chunkwire.Data{Content: chunkwire.ContentID{1}, Sender: 7, Seq: uint32(f), Chunk: 3, Fragment: uint8(f), Payload: payload}
				b.Push(d.Append(b.Next()))
				if b.Full() || f == 5 {
					b.Send(to, report)
				}
			}
			want := uint64(6 * (chunkwire.DataHeaderLen + chunkwire.FragmentSize))
			if sent != 6 || bytes != want {
				t.Fatalf("reported %d datagrams of %d bytes, want 6 of %d", sent, bytes, want)
			}
			if tc.batch && calls != 2 {
				t.Errorf("%d reports for two batches, want one per sendmmsg", calls)
			}
			buf := make([]byte, 2048)
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			for f := range 6 {
				n, _, err := rx.ReadFromUDP(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", f, err)
				}
				d, err := chunkwire.ParseData(buf[:n])
				if err != nil || d.Seq != uint32(f) || d.Fragment != uint8(f) {
					t.Fatalf("datagram %d: seq %d fragment %d (%v), want both %d", f, d.Seq, d.Fragment, err, f)
				}
			}

			// An address the socket cannot send to: every datagram is
			// refused and reported, none stops the others.
			to = &net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 9}
			var refused int
			for f := range 3 {
				d := chunkwire.Data{Content: chunkwire.ContentID{1}, Seq: uint32(f), Chunk: 3, Fragment: uint8(f), Payload: payload}
				b.Push(d.Append(b.Next()))
			}
			b.Send(to, func(n int, _ uint64, err error) {
				if err == nil {
					t.Errorf("%d datagrams sent to an IPv6 address on an IPv4 socket", n)
					return
				}
				refused++
			})
			if refused != 3 || b.Len() != 0 {
				t.Fatalf("%d refusals reported and %d datagrams held, want 3 and 0", refused, b.n)
			}
		})
	}
}
