package nbd

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// gatedExport holds every WriteAt until open is closed, counting those
// started: each holds its payload buffer meanwhile.
type gatedExport struct {
	*memExport
	open    chan struct{}
	started atomic.Int64
}

func (g *gatedExport) WriteAt(p []byte, off int64) (int, error) {
	g.started.Add(1)
	<-g.open
	return g.memExport.WriteAt(p, off)
}

// dialFrom is dial from a chosen loopback address, with a deadline long
// enough for a test that holds the connection while others work.
func dialFrom(t *testing.T, from net.IP, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	cl := &client{t: t, c: c, r: bufio.NewReader(c)}
	if _, err := ParseGreeting(cl.read(GreetingLen)); err != nil {
		t.Fatal(err)
	}
	cl.write([]byte{0, 0, 0, byte(ClientFixedNewstyle | ClientNoZeroes)})
	return cl
}

// TestUnreadSessionsShareClientBudget: four connections from one host
// send WRITEs their server cannot finish and read no reply. Their
// buffers together stop at MaxClientBufferBytes, not at MaxBufferBytes
// per connection (four times as much), the server says so once per
// session, and a machine on another address still reads its disk.
// Once the writes can finish, every one of them is answered.
func TestUnreadSessionsShareClientBudget(t *testing.T) {
	const (
		sessions = 4
		writes   = 10      // per session, more than one session's budget holds
		n        = 4 << 20 // bytes per WRITE
	)
	x := &gatedExport{memExport: &memExport{b: pattern(64 << 20)}, open: make(chan struct{})}
	logs := &testutil.SyncBuffer{}
	addr := serve(t, Config{MaxBufferBytes: MaxPayload, MaxClientBufferBytes: MaxPayload}, oneExport{x}, logs)
	opened := false
	defer func() {
		if !opened {
			close(x.open)
		}
	}()
	flood := make([]*client, sessions)
	sent := make(chan error, sessions)
	for i := range flood {
		c := dialFrom(t, net.IPv4(127, 0, 0, 2), addr)
		c.open("disk", false)
		flood[i] = c
		go func() {
			payload := make([]byte, n)
			for h := range uint64(writes) {
				if _, err := c.c.Write(append(AppendRequest(nil, Request{Type: CmdWrite, Handle: h, Offset: h * n, Length: n}), payload...)); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
	}
	// Every session stops, at its own bound or at the client's, and says
	// so once; then the count of held writes is final.
	held := func() int { return strings.Count(logs.String(), "nbd requests held back") }
	for deadline := time.Now().Add(20 * time.Second); held() < sessions && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if got := held(); got != sessions {
		t.Errorf("%d log lines say requests were held back, want %d: one per session", got, sessions)
	}
	started, bound := x.started.Load(), int64(MaxPayload/n)
	t.Logf("%d connections from one host, %d WRITEs of %d MiB each sent: %d held by the server (bound %d)", sessions, sessions*writes, n>>20, started, bound)
	if started != bound {
		t.Errorf("the server holds %d WRITEs of %d MiB from one host, want %d: the client's buffer bound, not the connections'", started, n>>20, bound)
	}

	// Another address has its own budget.
	other := dialFrom(t, net.IPv4(127, 0, 0, 1), addr)
	other.open("disk", false)
	other.send(Request{Type: CmdRead, Handle: 7, Offset: 0, Length: 1 << 20}, nil)
	if h, e, data := other.reply(1 << 20); h != 7 || e != 0 || len(data) != 1<<20 {
		t.Fatalf("a machine elsewhere read: handle %d, errno %v, %d bytes", h, e, len(data))
	}
	other.send(Request{Type: CmdDisc}, nil)

	close(x.open)
	opened = true
	for _, c := range flood {
		for range writes {
			if _, e, _ := c.reply(0); e != 0 {
				t.Fatalf("a held WRITE failed once released: %v", e)
			}
		}
	}
	for range sessions {
		if err := <-sent; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// TestConnsPerClient: connections from one address beyond
// MaxConnsPerClient are closed at once, attached or not, while other
// addresses still connect; a closed connection frees its place.
func TestConnsPerClient(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	exports := &memExports{m: map[string]*memExport{"rw": {b: pattern(1 << 20)}}}
	addr := serve(t, Config{MaxConnsPerClient: 3}, exports, logs)
	flooder := net.IPv4(127, 0, 0, 2)
	var held []*client
	for range 3 {
		c := dialFrom(t, flooder, addr)
		c.open("rw", false)
		held = append(held, c)
	}
	tests := []struct {
		name    string
		from    net.IP
		greeted bool
	}{
		{"fourth from the same host", flooder, false},
		{"from another host", net.IPv4(127, 0, 0, 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := greeted(t, tt.from, addr); got != tt.greeted {
				t.Errorf("greeted %v, want %v", got, tt.greeted)
			}
		})
	}
	if !strings.Contains(logs.String(), "too many open from one client") {
		t.Error("no log line says connections from one client were closed")
	}
	held[0].send(Request{Type: CmdDisc}, nil)
	held[0].expectClosed()
	// The session ends on the server's side a moment later.
	for deadline := time.Now().Add(5 * time.Second); !greeted(t, flooder, addr); {
		if time.Now().After(deadline) {
			t.Fatal("a connection closed by its client did not free its place within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// greeted connects from from and says whether the server sent its
// greeting rather than closing the connection.
func greeted(t *testing.T, from net.IP, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, _ := io.ReadFull(c, make([]byte, GreetingLen))
	return k == GreetingLen
}
