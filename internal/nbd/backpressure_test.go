package nbd

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// countingExport counts ReadSpan calls: each is a reply buffer the server
// fills and holds until the reply has been sent.
type countingExport struct {
	*memExport
	reads atomic.Int64
}

func (e *countingExport) ReadSpan(p []byte, off int64) (Span, error) {
	e.reads.Add(1)
	return e.memExport.ReadSpan(p, off)
}

// TestUnreadRepliesStallServer sends READs without reading the replies:
// the server must stop taking requests once MaxBufferBytes of replies
// wait for the socket, instead of reading and buffering them all.
func TestUnreadRepliesStallServer(t *testing.T) {
	const n = 1 << 20
	wmem, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	f := strings.Fields(string(wmem))
	if err != nil || len(f) != 3 {
		testutil.SkipUnlessCI(t, fmt.Sprintf("no tcp_wmem to bound the kernel's share with (%v)", err))
	}
	sndMax, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	const rcvBuf = 64 << 10
	// Replies the server can have finished: its budget, plus what the
	// kernel holds in the server's send buffer (autotuned up to the
	// tcp_wmem maximum) and in the client's fixed receive buffer (which
	// the kernel doubles), plus slack for a reply half sent. Without the
	// budget the server would take all count requests.
	bound := MaxPayload/n + (sndMax+2*rcvBuf+n-1)/n + 3
	count := bound + MaxPayload/n
	x := &countingExport{memExport: &memExport{b: pattern(4 << 20)}}
	c := dial(t, serveExport(t, Config{MaxBufferBytes: MaxPayload}, x), ClientFixedNewstyle|ClientNoZeroes)
	// A fixed receive buffer also stops the kernel from autotuning it.
	if err := c.c.(*net.TCPConn).SetReadBuffer(rcvBuf); err != nil {
		t.Fatal(err)
	}
	c.open("disk", false)
	var batch []byte
	for h := range uint64(count) {
		batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: h % 4 * n, Length: n})
	}
	c.write(batch) // 2 KB: the kernel takes it whatever the server does
	// The budget admits MaxPayload/n READs whatever the socket does; wait
	// for those, then for the count to stop moving.
	deadline := time.Now().Add(5 * time.Second)
	for x.reads.Load() < MaxPayload/n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for last := int64(-1); last != x.reads.Load() && time.Now().Before(deadline); {
		last = x.reads.Load()
		time.Sleep(300 * time.Millisecond)
	}
	got := x.reads.Load()
	if got < MaxPayload/n || got > bound {
		t.Fatalf("with replies unread the server read %d of %d requests, want %d to %d", got, count, MaxPayload/n, bound)
	}
	t.Logf("server stalled after %d of %d READs of %d bytes (bound %d)", got, count, n, bound)
	// Reading the replies lets it finish.
	seen := map[uint64]bool{}
	for range count {
		h, e, data := c.reply(n)
		if e != 0 || seen[h] || h >= uint64(count) || !bytes.Equal(data, x.at(int(h%4*n), n)) {
			t.Fatalf("reply for handle %d: errno %v, seen before %v, or wrong data", h, e, seen[h])
		}
		seen[h] = true
	}
	c.send(Request{Type: CmdDisc}, nil)
	c.expectClosed()
}
