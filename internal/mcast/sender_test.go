package mcast

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// fakeConn is a Sender's socket in memory: in feeds ReadFrom, every
// WriteTo is reported on wrote, and data datagrams fail with dataErr.
type fakeConn struct {
	in      chan []byte
	wrote   chan []byte
	dataErr error
	once    sync.Once
	stop    chan struct{}
}

func newFakeConn(dataErr error) *fakeConn {
	return &fakeConn{in: make(chan []byte, 16), wrote: make(chan []byte, 64), dataErr: dataErr, stop: make(chan struct{})}
}

var agentAddr = net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.0.0.9:4000"))

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case p := <-c.in:
		return copy(b, p), agentAddr, nil
	case <-c.stop:
		return 0, nil, os.ErrDeadlineExceeded
	}
}

func (c *fakeConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.wrote <- append([]byte(nil), b...)
	if typ, _, _ := chunkwire.Peek(b); typ == chunkwire.TypeData && c.dataErr != nil {
		return 0, c.dataErr
	}
	return len(b), nil
}

func (c *fakeConn) SetReadDeadline(time.Time) error {
	c.once.Do(func() { close(c.stop) })
	return nil
}

func (c *fakeConn) Close() error                     { return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return agentAddr }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// startSender runs a Sender of size zero bytes on conn until the test ends.
func startSender(t *testing.T, conn *fakeConn, size int64, log *slog.Logger) (*Sender, chunkwire.ContentID) {
	t.Helper()
	s, err := NewSender(conn, SenderConfig{Rate: 1 << 30, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	id := chunkwire.ContentID{7}
	if err := s.Add(Content{ID: id, Group: testGroup, Size: size, Data: bytes.NewReader(make([]byte, size))}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, id
}

// next returns the next datagram the Sender wrote, failing t after 5 s.
func (c *fakeConn) next(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-c.wrote:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("the sender wrote nothing within 5 s")
		return nil
	}
}

// TestSenderAnswersHelloAndSendsWhatWasAsked: a hello gets the Announce,
// and a request for a short last chunk gets exactly its fragments, the
// last one flagged as the end of the pass.
func TestSenderAnswersHelloAndSendsWhatWasAsked(t *testing.T) {
	const size = chunkwire.ChunkSize + 2*chunkwire.FragmentSize + 10
	conn := newFakeConn(nil)
	_, id := startSender(t, conn, size, nil)
	conn.in <- (&chunkwire.Request{Content: id, Receiver: 1}).Append(nil)
	a, err := chunkwire.ParseAnnounce(conn.next(t))
	if err != nil || a.Size != size || a.Group != testGroup || a.Sender == 0 {
		t.Fatalf("announce %+v, %v; want size %d, group %v, a sender id", a, err, size, testGroup)
	}
	conn.in <- (&chunkwire.Request{Content: id, Receiver: 1, Ranges: []chunkwire.Range{{First: 1, Count: 5, Mask: chunkwire.AllFragments}}}).Append(nil)
	for f := range 3 {
		d, err := chunkwire.ParseData(conn.next(t))
		if err != nil || d.Chunk != 1 || int(d.Fragment) != f || d.Sender != a.Sender || d.Seq != a.NextSeq+uint32(f) {
			t.Fatalf("datagram %d: %+v, %v", f, d, err)
		}
		if last := f == 2; (d.Flags&chunkwire.FlagEnd != 0) != last || (last && len(d.Payload) != 10) {
			t.Fatalf("datagram %d: flags %#x, %d bytes", f, d.Flags, len(d.Payload))
		}
	}
}

// TestSenderLogsFailedSendsSparingly: a socket that refuses every data
// datagram costs a log line at the 1st, 2nd, 4th... failure, not one per
// datagram, and every failure is counted.
func TestSenderLogsFailedSendsSparingly(t *testing.T) {
	const chunks = 8
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	conn := newFakeConn(errors.New("network is unreachable"))
	s, id := startSender(t, conn, chunks*chunkwire.ChunkSize, log)
	conn.in <- (&chunkwire.Request{Content: id, Ranges: []chunkwire.Range{{First: 0, Count: chunks, Mask: chunkwire.AllFragments}}}).Append(nil)
	for range chunks * chunkwire.FragmentsPerChunk {
		conn.next(t)
	}
	// The send loop counts and logs a failure after its WriteTo returns
	// and before its next one: one more datagram (a repair, which is
	// never suppressed) orders the 256th's count and log before the check.
	conn.in <- (&chunkwire.Request{Content: id, Flags: chunkwire.FlagRepair, Ranges: []chunkwire.Range{{First: 0, Count: 1, Mask: 1}}}).Append(nil)
	conn.next(t)
	if got := s.Stats().SendErrors; got < chunks*chunkwire.FragmentsPerChunk {
		t.Fatalf("counted %d failed sends, want at least %d", got, chunks*chunkwire.FragmentsPerChunk)
	}
	mu.Lock()
	defer mu.Unlock()
	// 256 failures: lines at 1, 2, 4, ... 256.
	if n := strings.Count(logs.String(), "multicast: send failed"); n != 9 {
		t.Fatalf("%d log lines for 256 failures, want 9:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSenderCountsPassesAgain: the bytes of a chunk passed over a second
// time (a repair, a late asker) are counted apart from first passes, per
// Sender and per content.
func TestSenderCountsPassesAgain(t *testing.T) {
	conn := newFakeConn(nil)
	s, id := startSender(t, conn, 4*chunkwire.ChunkSize, nil)
	ask := func(flags uint16, chunk, mask uint32) {
		conn.in <- (&chunkwire.Request{Content: id, Flags: flags, Ranges: []chunkwire.Range{{First: chunk, Count: 1, Mask: mask}}}).Append(nil)
	}
	ask(0, 0, chunkwire.AllFragments)
	for range chunkwire.FragmentsPerChunk {
		conn.next(t)
	}
	ask(chunkwire.FlagRepair, 0, 0b101)
	again := len(conn.next(t)) + len(conn.next(t))
	// The send loop counts a datagram after writing it: the next one, of
	// a chunk never sent, orders the repair's counts before the check.
	ask(0, 1, 1)
	first := conn.next(t)
	if d, err := chunkwire.ParseData(first); err != nil || d.Chunk != 1 {
		t.Fatalf("datagram after the repair: %+v, %v; want chunk 1", d, err)
	}
	if got := s.Stats().Again; got != uint64(again) {
		t.Errorf("sender counted %d bytes again, want the repair's %d", got, again)
	}
	if cs, _ := s.ContentStats(id); cs.Again != uint64(again) || cs.Bytes < cs.Again+uint64(chunkwire.ChunkSize) {
		t.Errorf("content stats %+v, want %d bytes again of at least %d", cs, again, again+chunkwire.ChunkSize)
	}
}
