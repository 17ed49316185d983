//go:build linux

package tftp

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const onThread = "lockstep transfer on a thread of its own"

// TestLockstepBlocking runs lockstep transfers through the blocking socket,
// with the misbehaviours the netpoller path is tested with, and checks that
// windowed transfers never take it.
func TestLockstepBlocking(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(21, 300*512+77)
	fsys.put("f", data)
	// A fixed RTO: an adaptive one shrinks to MinTimeout on loopback, and a
	// loaded machine then stalls past it and retransmits where no test expects.
	addr, rec, logs := startServer(t, Config{FS: fsys, Timeout: 250 * time.Millisecond, MinTimeout: 250 * time.Millisecond})
	tests := []struct {
		name         string
		opts         []string
		drop         func(idx uint64, seen int) bool
		dropAck      func(n uint64, seen int) bool
		dupAcks      int
		wantBack     []uint64
		wantRetrans  int // -1: at least one
		wantBlocking bool
	}{
		{name: "no options", wantBlocking: true},
		{name: "blksize and tsize", opts: []string{"blksize", "1456", "tsize", "0"}, wantBlocking: true},
		{name: "lost DATA", drop: func(idx uint64, seen int) bool { return idx == 50 && seen == 0 },
			wantBack: []uint64{50}, wantRetrans: 1, wantBlocking: true},
		{name: "lost DATA twice", drop: func(idx uint64, seen int) bool { return idx == 50 && seen < 2 },
			wantBack: []uint64{50, 50}, wantRetrans: 2, wantBlocking: true},
		{name: "lost ACK", dropAck: func(n uint64, seen int) bool { return n == 70 && seen == 0 },
			wantBack: []uint64{70}, wantRetrans: 1, wantBlocking: true},
		{name: "every ACK three times", dupAcks: 2, wantBlocking: true},
		{name: "windowsize 4 stays on the poller", opts: []string{"windowsize", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(logs.String(), onThread)
			c := newTestClient(addr).withOpts(tt.opts...)
			c.timeout = 5 * time.Second // the server, not the client, must recover
			c.drop, c.dropAck, c.dupAcks = tt.drop, tt.dropAck, tt.dupAcks
			got, err := c.get(testCtx(t, 20*time.Second), "f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("content differs: got %d bytes, want %d", len(got), len(data))
			}
			st := rec.next(t)
			if st.Err != nil || st.Retransmits != tt.wantRetrans {
				t.Errorf("stats %+v: want success and %d retransmits", st, tt.wantRetrans)
			}
			if back := c.goBackPoints(); fmt.Sprint(back) != fmt.Sprint(tt.wantBack) {
				t.Errorf("retransmissions at %v, want %v", back, tt.wantBack)
			}
			if tt.dupAcks > 0 && c.nDATA != int(c.trace[len(c.trace)-1]) {
				t.Errorf("received %d DATA for %d blocks: duplicate ACKs caused retransmissions", c.nDATA, c.trace[len(c.trace)-1])
			}
			if got := strings.Count(logs.String(), onThread) - before; got != boolInt(tt.wantBlocking) {
				t.Errorf("%d transfers on a thread of their own, want %d", got, boolInt(tt.wantBlocking))
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLockstepGiveUpAndShutdown: a client that goes silent mid-transfer is
// abandoned with an ERROR sent from the blocking socket, and a server
// shutdown wakes a transfer asleep in recv at once.
func TestLockstepGiveUpAndShutdown(t *testing.T) {
	fsys := newMapFS()
	fsys.put("f", randBytes(22, 100*512))
	t.Run("give up", func(t *testing.T) {
		defer setClientWait(50 * time.Millisecond)() // before the server's goroutines start
		addr, rec, logs := startServer(t, Config{FS: fsys, Timeout: 20 * time.Millisecond, MinTimeout: 10 * time.Millisecond, Retries: 3})
		c := newTestClient(addr)
		c.timeout = 2 * time.Second
		c.drop = func(idx uint64, seen int) bool { return idx > 8 }
		errc := make(chan error, 1)
		go func() { _, err := c.get(testCtx(t, 5*time.Second), "f"); errc <- err }()
		st := rec.next(t)
		if !isGiveUp(st.Err) || st.Bytes != 8*512 || st.Retransmits < 3 {
			t.Fatalf("stats %+v: want give-up after 8 blocks and at least 3 retransmissions", st)
		}
		var e *Error
		if err := <-errc; !errors.As(err, &e) || !strings.Contains(e.Message, "timed out") {
			t.Fatalf("client got %v, want the server's ERROR", err)
		}
		if !strings.Contains(logs.String(), onThread) {
			t.Fatal("the transfer never left the poller")
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		logs := &syncBuffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		silentAfter3 := func(idx uint64, seen int) bool { return idx > 3 }
		// Once on a thread of its own, the transfer sleeps in recv, 10 s
		// from its timeout.
		checkShutdown(t, Config{FS: fsys, Timeout: 10 * time.Second, Logger: logger}, silentAfter3, func() bool {
			if !strings.Contains(logs.String(), onThread) {
				return false
			}
			time.Sleep(50 * time.Millisecond) // long enough to be asleep in recv
			return true
		})
	})
}

// TestLockstepThreadBound: beyond LockstepThreads, lockstep transfers stay
// on the poller and still complete; a finished transfer frees its slot.
func TestLockstepThreadBound(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(23, 200*512+5)
	fsys.put("f", data)
	for _, tt := range []struct {
		name    string
		threads int
		want    int // transfers on a thread of their own, of three
	}{
		{"one slot, two at once, then one", 1, 2},
		{"two slots", 2, 3},
		{"none", -1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr, rec, logs := startServer(t, Config{FS: fsys, Timeout: 300 * time.Millisecond, MinTimeout: 300 * time.Millisecond, LockstepThreads: tt.threads})
			get := func(c *testClient) error {
				got, err := c.get(testCtx(t, 20*time.Second), "f")
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("content differs")
				}
				return err
			}
			// The first transfer stalls 300 ms on a lost block while the
			// second runs from start to end.
			slow := newTestClient(addr)
			slow.drop = func(idx uint64, seen int) bool { return idx == 100 && seen == 0 }
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			wg.Go(func() { errs <- get(slow) })
			if tt.threads > 0 {
				waitFor(t, func() bool { return strings.Contains(logs.String(), onThread) })
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			errs <- get(newTestClient(addr))
			wg.Wait()
			// The report comes after the slot is freed.
			for range 2 {
				if st := rec.next(t); st.Err != nil {
					t.Fatalf("stats %+v", st)
				}
			}
			errs <- get(newTestClient(addr))
			if st := rec.next(t); st.Err != nil {
				t.Fatalf("stats %+v", st)
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Count(logs.String(), onThread); got != tt.want {
				t.Fatalf("%d transfers on a thread of their own, want %d", got, tt.want)
			}
		})
	}
}

// TestBlockingConn checks the socket's own contract: deadlines, datagrams,
// an ICMP refusal and a shutdown from another goroutine.
func TestBlockingConn(t *testing.T) {
	pair := func(t *testing.T) (*blockingConn, *net.UDPConn) {
		peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { peer.Close() })
		c, err := net.DialUDP("udp4", nil, peer.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		bc, err := detachBlocking(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bc.Close() })
		return bc.(*blockingConn), peer
	}
	buf := make([]byte, 100)
	t.Run("deadline", func(t *testing.T) {
		bc, _ := pair(t)
		for _, d := range []time.Duration{30 * time.Millisecond, 80 * time.Millisecond, 5 * time.Millisecond} {
			start := time.Now()
			bc.SetReadDeadline(start.Add(d))
			_, err := bc.Read(buf)
			el := time.Since(start)
			if !errors.Is(err, os.ErrDeadlineExceeded) || el < d || el > d+rcvtimeoSlack(d)+500*time.Millisecond {
				t.Fatalf("deadline %v: Read after %v returned %v, want ErrDeadlineExceeded on time", d, el, err)
			}
		}
		bc.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := bc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("past deadline: Read = %v", err)
		}
	})
	t.Run("datagram, then write back", func(t *testing.T) {
		bc, peer := pair(t)
		var from *net.UDPAddr
		go func() {
			time.Sleep(20 * time.Millisecond)
			peer.WriteToUDP([]byte("ack"), bcAddr(t, bc))
		}()
		bc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := bc.Read(buf)
		if err != nil || string(buf[:n]) != "ack" {
			t.Fatalf("Read = %q, %v; want \"ack\"", buf[:n], err)
		}
		if err := bc.writeData([]dataPacket{{hdr: [4]byte{0, 3, 0, 1}, payload: []byte("xy")}, {hdr: [4]byte{0, 3, 0, 2}}}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\x00\x03\x00\x01xy", "\x00\x03\x00\x02"} {
			peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, f, err := peer.ReadFromUDP(buf)
			if err != nil || string(buf[:n]) != want {
				t.Fatalf("peer got %q, %v; want %q", buf[:n], err, want)
			}
			from = f
		}
		if from.Port != bcAddr(t, bc).Port {
			t.Fatalf("DATA came from port %d, want the transfer's %d", from.Port, bcAddr(t, bc).Port)
		}
	})
	t.Run("port unreachable", func(t *testing.T) {
		bc, peer := pair(t)
		peer.Close()
		bc.Write([]byte("x"))
		bc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := bc.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Read = %v, want ECONNREFUSED", err)
		}
	})
	t.Run("shutdown wakes a read", func(t *testing.T) {
		bc, _ := pair(t)
		go func() {
			time.Sleep(50 * time.Millisecond)
			bc.shutdown()
		}()
		start := time.Now()
		bc.SetReadDeadline(start.Add(10 * time.Second))
		if _, err := bc.Read(buf); !errors.Is(err, net.ErrClosed) || time.Since(start) > 2*time.Second {
			t.Fatalf("Read = %v after %v, want net.ErrClosed at once", err, time.Since(start))
		}
		bc.Close()
		bc.shutdown() // after Close: must not touch a reused descriptor
	})
}

// bcAddr is the local address of bc's socket.
func bcAddr(t *testing.T, bc *blockingConn) *net.UDPAddr {
	sa, err := syscall.Getsockname(bc.fd)
	if err != nil {
		t.Fatal(err)
	}
	in := sa.(*syscall.SockaddrInet4)
	return &net.UDPAddr{IP: net.IP(in.Addr[:]), Port: in.Port}
}
