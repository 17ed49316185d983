package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
)

// mtftpGroup is the storm's one socket on iPXE's MTFTP group, which
// hands each datagram to every machine fetching by mtftp:// now. A real
// iPXE has a socket of its own on the group; here they share one, as
// with the root's groups (mcast.Hub), because two CPUs cannot read a
// copy per machine at the group's rate. What each machine does with a
// datagram (its peer, its bitmap, its timer) is its own, and costs no
// goroutine wake-up: the reader updates every fetch under one lock per
// batch, and a machine's goroutine wakes only for its timer or its end.
type mtftpGroup struct {
	conn *net.UDPConn

	mu      sync.Mutex
	fetches []*mtftpFetch // listening now
}

// mtftpReadBuffer is the group socket's receive buffer: what arrives
// while the reader updates every fetch, about 1 s of a 500 Mbit/s group.
const mtftpReadBuffer = 64 << 20

// listenMTFTP joins group on ifi (nil: as routing says) and starts
// reading it until close.
func listenMTFTP(group netip.AddrPort, ifi *net.Interface) (*mtftpGroup, error) {
	c, err := net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(group))
	if err != nil {
		return nil, fmt.Errorf("mtftp: join %v: %w", group, err)
	}
	c.SetReadBuffer(mtftpReadBuffer) // capped by net.core.rmem_max; smaller only loses more
	g := &mtftpGroup{conn: c}
	go g.run()
	return g, nil
}

func (g *mtftpGroup) close() error { return g.conn.Close() }

// mtftp returns the storm's MTFTP group, joining MTFTPGroup on first use.
func (h *hubs) mtftp() (*mtftpGroup, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mt == nil {
		g, err := listenMTFTP(MTFTPGroup, h.ifi)
		if err != nil {
			return nil, err
		}
		h.mt = g
	}
	return h.mt, nil
}

// mtftpBatch is the most datagrams read with one system call.
const mtftpBatch = 64

func (g *mtftpGroup) run() {
	pc := ipv4.NewPacketConn(g.conn)
	msgs := make([]ipv4.Message, mtftpBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 1500)}
	}
	batch := make([]mtftpPacket, 0, mtftpBatch)
	for {
		n, err := pc.ReadBatch(msgs, 0)
		if err != nil {
			return
		}
		batch = batch[:0]
		for _, m := range msgs[:n] {
			ua, _ := m.Addr.(*net.UDPAddr)
			if ua == nil {
				continue
			}
			if p, ok := parseMTFTP(m.Buffers[0][:m.N], ua.AddrPort()); ok {
				batch = append(batch, p)
			}
		}
		g.deliver(batch, time.Now())
	}
}

// deliver hands a batch to every fetch, one fetch at a time, so that
// each one's state is touched once per batch.
func (g *mtftpGroup) deliver(batch []mtftpPacket, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.fetches {
		for _, p := range batch {
			f.receive(p, false, now)
		}
	}
}

// mtftpGet is one mtftp:// fetch of path (the URL's; its leading '/'
// is not sent) from server. open gives a fresh unicast socket on the
// machine's address (each reopen takes a new one); plain is iPXE's own
// fallback, the same path by plain TFTP; w (nil: discard) gets the
// blocks at their offsets.
type mtftpGet struct {
	server netip.AddrPort
	path   string
	open   func() (*net.UDPConn, error)
	plain  func(ctx context.Context, path string, w io.Writer) (int64, error)
	w      io.WriterAt
}

// get runs the fetch to its end: the file whole, an ERROR, or the plain
// TFTP fallback's outcome. It returns the bytes received and what it did.
func (g *mtftpGroup) get(ctx context.Context, o mtftpGet) (int64, MTFTPStats, error) {
	path := strings.TrimPrefix(o.path, "/")
	f := &mtftpFetch{server: o.server, path: path, open: o.open, w: o.w, wake: make(chan struct{}, 1)}
	if err := f.reopen(); err != nil {
		return 0, f.st, err
	}
	go g.readUnicast(f, f.conn)
	g.mu.Lock()
	g.fetches = append(g.fetches, f)
	f.timer.startNow(time.Now())
	g.mu.Unlock()

	fallBack, err := g.wait(ctx, f)
	g.mu.Lock()
	g.fetches = slices.DeleteFunc(g.fetches, func(x *mtftpFetch) bool { return x == f })
	f.conn.Close()
	st := f.st
	g.mu.Unlock()
	n := st.MulticastBytes + st.UnicastBytes
	if !fallBack {
		return n, st, err
	}
	st.FellBack = true
	var w io.Writer = io.Discard
	if o.w != nil {
		w = io.NewOffsetWriter(o.w, 0)
	}
	m, err := o.plain(ctx, path, w)
	if err != nil {
		err = fmt.Errorf("mtftp %s: no answer on %v, then plain TFTP: %w", path, o.server, err)
	}
	return n + m, st, err
}

// wait sleeps until the fetch ends or its timer expires, handles the
// expiry, and sleeps again; it reports whether iPXE falls back now.
func (g *mtftpGroup) wait(ctx context.Context, f *mtftpFetch) (bool, error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		g.mu.Lock()
		if f.done {
			g.mu.Unlock()
			return false, f.err
		}
		now, d := time.Now(), f.timer.deadline()
		if !now.Before(d) {
			old := f.conn
			fallBack, err := f.expired(now)
			if f.conn != old {
				go g.readUnicast(f, f.conn)
			}
			g.mu.Unlock()
			if fallBack || err != nil {
				return fallBack, err
			}
			continue
		}
		t.Reset(d.Sub(now))
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return false, ctxErr(ctx, f.path)
		case <-f.wake:
		case <-t.C:
		}
	}
}

// readUnicast reads the fetch's socket c until it is closed (the fetch's
// end or a reopen).
func (g *mtftpGroup) readUnicast(f *mtftpFetch, c *net.UDPConn) {
	buf := make([]byte, 1500)
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error from an earlier send: iPXE ignores it too
		}
		p, ok := parseMTFTP(buf[:n], netip.AddrPortFrom(src.Addr().Unmap(), src.Port()))
		if !ok {
			continue
		}
		g.mu.Lock()
		if f.conn == c { // a packet to a socket already replaced is lost, as in iPXE
			f.receive(p, true, time.Now())
		}
		g.mu.Unlock()
	}
}
