package storm

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// testCarousel is the server side of the MTFTP contract, small, for
// these tests only: RRQs for file on its control socket make it send
// every block once more from where it is, from one data socket to the
// group, paced; an RRQ for another name gets an ERROR from the data
// socket; ACKs are ignored.
type testCarousel struct {
	ctl, data *net.UDPConn
	group     netip.AddrPort
	file      string
	content   []byte
	gap       time.Duration // between datagrams
	// drop says whether the n-th datagram sent (from 1) is lost instead.
	drop func(n int64) bool

	mu     sync.Mutex
	next   int // the block (from 0) sent next
	left   int // blocks still owed to the RRQs so far
	wakeup chan struct{}

	sent    atomic.Int64 // datagrams sent or dropped
	rrqs    atomic.Int64
	lastRRQ atomic.Int64 // sent when the last RRQ came
}

func (c *testCarousel) blocks() int { return len(c.content)/mtftpBlockSize + 1 }

// serve answers RRQs until ctx ends; run it with run.
func (c *testCarousel) serve(ctx context.Context) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		n, src, err := c.ctl.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		p, err := tftp.ParsePacket(buf[:n])
		r, ok := p.(*tftp.Request)
		if err != nil || !ok || r.Op != tftp.OpRRQ {
			continue
		}
		c.rrqs.Add(1)
		c.lastRRQ.Store(c.sent.Load())
		if r.Filename != c.file {
			c.data.WriteToUDPAddrPort((&tftp.Error{Code: tftp.ErrCodeFileNotFound, Message: "not on air"}).Append(nil), src)
			continue
		}
		c.kick()
	}
}

// run sends the blocks owed until ctx ends.
func (c *testCarousel) run(ctx context.Context) {
	pkt := make([]byte, 4+mtftpBlockSize)
	for {
		c.mu.Lock()
		if c.left == 0 {
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-c.wakeup:
			}
			continue
		}
		i := c.next
		c.next = (c.next + 1) % c.blocks()
		c.left--
		c.mu.Unlock()
		off := i * mtftpBlockSize
		payload := c.content[off:min(off+mtftpBlockSize, len(c.content))]
		binary.BigEndian.PutUint16(pkt, uint16(tftp.OpDATA))
		binary.BigEndian.PutUint16(pkt[2:], uint16(i+1))
		b := append(pkt[:4], payload...)
		if n := c.sent.Add(1); c.drop == nil || !c.drop(n) {
			c.data.WriteToUDPAddrPort(b, c.group)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.gap):
		}
	}
}

// kick makes the carousel send a cycle as an RRQ would.
func (c *testCarousel) kick() {
	c.mu.Lock()
	c.left = c.blocks()
	c.mu.Unlock()
	select {
	case c.wakeup <- struct{}{}:
	default:
	}
}
