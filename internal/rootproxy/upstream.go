package rootproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// Dial connects to a server of the root and runs the NBD handshake;
// attempt counts from 1 and lets the caller rotate through its servers
// and pause between rounds. server names the server for the log.
type Dial func(ctx context.Context, attempt int) (conn net.Conn, info nbd.Negotiated, server string, err error)

// UpstreamConfig says how the proxy reaches the servers.
type UpstreamConfig struct {
	Dial Dial // required
	// Timeout is how long a request may go unanswered before its server
	// is taken for dead and every request in flight moves to the next
	// one. Default 10 s.
	Timeout time.Duration
	// GiveUp is how long a request may wait for any server at all before
	// it fails with EIO. Default 120 s, as the kernel's dead-connection
	// timeout of the direct path.
	GiveUp time.Duration
	// MaxInFlight bounds the requests sent and unanswered. Default 64.
	MaxInFlight int
	Logger      *slog.Logger
	// OnFailover, if set, is told each time requests moved to another
	// server: the one left, the one reached and how long it took.
	OnFailover func(from, to string, after time.Duration)
}

// Upstream is the proxy's unicast NBD client: one connection at a time
// to one of the root's servers, requests pipelined on it, simple replies
// only. When the connection fails, or a request goes unanswered for
// Timeout, it dials the next server and sends every unanswered request
// again, so the kernel above sees a pause, never an error, as with the
// direct path's reconnect. Every request of a session is idempotent
// (reads, writes of given bytes at given offsets, flushes), so sending
// one twice is safe.
type Upstream struct {
	cfg  UpstreamConfig
	log  *slog.Logger
	info nbd.Negotiated

	free chan int // free call slots

	mu       sync.Mutex
	calls    []call
	conn     net.Conn
	server   string
	gen      uint64        // connection generation; 0: none
	readerUp chan struct{} // closed when the reader of gen has exited
	redial   bool          // a redial is running
	closed   bool
	attempts int

	wmu  sync.Mutex // one request on the wire at a time
	wbuf []byte

	stop chan struct{}
}

// call is one request slot; its index is the request's handle.
type call struct {
	active bool
	req    nbd.Request
	wdata  []byte
	rbuf   []byte
	gen    uint64    // connection it was last sent on; 0: waiting for one
	sent   time.Time // when it was last sent
	start  time.Time
	err    error
	done   chan struct{} // one token when answered or failed
}

// NewUpstream dials the first server that answers, within GiveUp.
func NewUpstream(ctx context.Context, cfg UpstreamConfig) (*Upstream, error) {
	if cfg.Dial == nil {
		return nil, errors.New("rootproxy: upstream without a Dial")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = 120 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	u := &Upstream{cfg: cfg, log: cfg.Logger, free: make(chan int, cfg.MaxInFlight),
		calls: make([]call, cfg.MaxInFlight), stop: make(chan struct{}), wbuf: make([]byte, 0, nbd.RequestLen)}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	for i := range u.calls {
		u.calls[i].done = make(chan struct{}, 1)
		u.free <- i
	}
	start := time.Now()
	var last error
	for time.Since(start) < cfg.GiveUp {
		u.attempts++
		conn, info, server, err := cfg.Dial(ctx, u.attempts)
		if err == nil {
			u.info = info
			u.attach(conn, server)
			go u.watch()
			return u, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("rootproxy: no server of the root answered within %v: %w", cfg.GiveUp, last)
}

// Info is what the first server said about the export.
func (u *Upstream) Info() nbd.Negotiated { return u.info }

// Close fails the requests in flight and closes the connection.
func (u *Upstream) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	close(u.stop)
	conn, exited := u.conn, u.readerUp
	u.mu.Unlock()
	if conn != nil {
		conn.Close()
		<-exited
	}
	u.failOlderThan(0)
	return nil
}

// attach makes conn the connection and starts its reader. u.mu is not held.
func (u *Upstream) attach(conn net.Conn, server string) {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		conn.Close()
		return
	}
	u.gen++
	u.conn, u.server = conn, server
	exited := make(chan struct{})
	u.readerUp = exited
	gen := u.gen
	u.mu.Unlock()
	go func() {
		defer close(exited)
		u.read(conn, gen)
	}()
}

// Do sends one request and waits for its answer: wdata is a WRITE's
// payload, rbuf receives a READ's. An error from the server wraps the
// syscall errno it sent (EPERM for a read-only export), so nbd's server
// passes it on to the kernel unchanged.
func (u *Upstream) Do(req nbd.Request, wdata, rbuf []byte) error {
	var i int
	select {
	case i = <-u.free:
	case <-u.stop:
		return fmt.Errorf("rootproxy: upstream closed: %w", syscall.EIO)
	}
	u.mu.Lock()
	c := &u.calls[i]
	req.Handle = uint64(i)
	*c = call{active: true, req: req, wdata: wdata, rbuf: rbuf, start: time.Now(), done: c.done}
	conn, gen := u.conn, u.gen
	u.mu.Unlock()
	if conn != nil {
		u.send(conn, gen, i)
	}
	<-c.done
	u.mu.Lock()
	err := c.err
	*c = call{done: c.done}
	u.mu.Unlock()
	u.free <- i
	return err
}

// send writes call i on conn, unless it has moved on. A failed write
// breaks the connection; the redial sends the call again.
func (u *Upstream) send(conn net.Conn, gen uint64, i int) {
	u.wmu.Lock()
	defer u.wmu.Unlock()
	u.mu.Lock()
	c := &u.calls[i]
	if !c.active || u.gen != gen || c.gen == gen {
		u.mu.Unlock()
		return
	}
	c.gen, c.sent = gen, time.Now()
	req, wdata := c.req, c.wdata
	u.mu.Unlock()
	u.wbuf = nbd.AppendRequest(u.wbuf[:0], req)
	bufs := net.Buffers{u.wbuf}
	if req.Type == nbd.CmdWrite {
		bufs = append(bufs, wdata)
	}
	conn.SetWriteDeadline(time.Now().Add(u.cfg.Timeout))
	if _, err := bufs.WriteTo(conn); err != nil {
		u.broken(gen, fmt.Errorf("send %v: %w", req.Type, err))
	}
}

// read takes replies from conn until it fails.
func (u *Upstream) read(conn net.Conn, gen uint64) {
	br := bufio.NewReaderSize(conn, 64<<10)
	var hdr [nbd.SimpleReplyLen]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			u.broken(gen, fmt.Errorf("read reply: %w", err))
			return
		}
		handle, errno, err := nbd.ParseSimpleReply(hdr[:])
		if err != nil {
			u.broken(gen, err)
			return
		}
		u.mu.Lock()
		var c *call
		if handle < uint64(len(u.calls)) && u.calls[handle].active && u.calls[handle].gen == gen {
			c = &u.calls[handle]
		}
		u.mu.Unlock()
		if c == nil {
			u.broken(gen, fmt.Errorf("reply for handle %d, which is not in flight on this connection", handle))
			return
		}
		// Only this reader completes calls sent on gen, and a redial waits
		// for it to exit before it touches them, so c is ours until done.
		if errno == 0 && c.req.Type == nbd.CmdRead {
			if _, err := io.ReadFull(br, c.rbuf[:c.req.Length]); err != nil {
				u.broken(gen, fmt.Errorf("read %d bytes of READ data: %w", c.req.Length, err))
				return
			}
		}
		u.finish(c, errnoError(c.req, errno))
	}
}

// finish completes a call.
func (u *Upstream) finish(c *call, err error) {
	u.mu.Lock()
	if !c.active {
		u.mu.Unlock()
		return
	}
	c.err, c.active = err, false
	u.mu.Unlock()
	c.done <- struct{}{}
}

// errnoError turns a reply's errno into the syscall error nbd's server
// maps back to the same errno.
func errnoError(req nbd.Request, e nbd.Errno) error {
	var se syscall.Errno
	switch e {
	case 0:
		return nil
	case nbd.EPERM:
		se = syscall.EPERM
	case nbd.ENOSPC:
		se = syscall.ENOSPC
	case nbd.EINVAL:
		se = syscall.EINVAL
	default:
		se = syscall.EIO
	}
	return fmt.Errorf("rootproxy: server answered %v %d+%d with %v: %w", req.Type, req.Offset, req.Length, e, se)
}

// broken drops connection gen, if it is still the current one, and
// starts the redial.
func (u *Upstream) broken(gen uint64, why error) {
	u.mu.Lock()
	if u.gen != gen || u.conn == nil || u.closed {
		u.mu.Unlock()
		return
	}
	conn, server, exited := u.conn, u.server, u.readerUp
	u.conn = nil
	start := u.redial
	u.redial = true
	u.mu.Unlock()
	conn.Close()
	u.log.Warn("root server connection lost; moving to the next server", "server", server, "err", why)
	if !start {
		go u.redialLoop(server, exited)
	}
}

// redialLoop dials servers until one answers, then sends every call in
// flight on it. Calls that waited longer than GiveUp fail with EIO.
func (u *Upstream) redialLoop(from string, exited chan struct{}) {
	<-exited // the old reader no longer touches the calls
	start := time.Now()
	for {
		u.failOlderThan(u.cfg.GiveUp)
		select {
		case <-u.stop:
			u.failOlderThan(0)
			return
		default:
		}
		u.mu.Lock()
		u.attempts++
		attempt := u.attempts
		u.mu.Unlock()
		conn, info, server, err := u.cfg.Dial(context.Background(), attempt)
		if err == nil && info.Size != u.info.Size {
			conn.Close()
			err = fmt.Errorf("export has %d bytes there, %d on the first server", info.Size, u.info.Size)
		}
		if err != nil {
			u.log.Debug("root server did not answer", "server", server, "attempt", attempt, "err", err)
			continue
		}
		u.mu.Lock()
		u.redial = false
		u.mu.Unlock()
		u.attach(conn, server)
		after := time.Since(start)
		u.log.Info("root server connection moved", "from", from, "to", server, "after", after.Round(time.Millisecond))
		if u.cfg.OnFailover != nil {
			u.cfg.OnFailover(from, server, after)
		}
		u.resend()
		return
	}
}

// resend sends every active call on the current connection.
func (u *Upstream) resend() {
	u.mu.Lock()
	conn, gen := u.conn, u.gen
	var pend []int
	for i := range u.calls {
		if u.calls[i].active && u.calls[i].gen != gen {
			pend = append(pend, i)
		}
	}
	u.mu.Unlock()
	for _, i := range pend {
		if conn != nil {
			u.send(conn, gen, i)
		}
	}
}

// failOlderThan fails the calls waiting without a connection for longer
// than d. Only the redial and Close call it, while no reader runs.
func (u *Upstream) failOlderThan(d time.Duration) {
	now := time.Now()
	var fail []*call
	u.mu.Lock()
	for i := range u.calls {
		if c := &u.calls[i]; c.active && now.Sub(c.start) >= d {
			fail = append(fail, c)
		}
	}
	u.mu.Unlock()
	for _, c := range fail {
		u.finish(c, fmt.Errorf("rootproxy: %v %d+%d: no server of the root answered for %v: %w", c.req.Type, c.req.Offset, c.req.Length, d, syscall.EIO))
	}
}

// watch breaks a connection on which a request has waited for Timeout:
// a server that died without a reset, or a cable pulled on its side.
func (u *Upstream) watch() {
	t := time.NewTicker(u.cfg.Timeout / 4)
	defer t.Stop()
	for {
		select {
		case <-u.stop:
			return
		case now := <-t.C:
			u.mu.Lock()
			gen, stale := u.gen, false
			for i := range u.calls {
				c := &u.calls[i]
				if c.active && c.gen == gen && gen != 0 && now.Sub(c.sent) >= u.cfg.Timeout {
					stale = true
				}
			}
			u.mu.Unlock()
			if stale {
				u.broken(gen, fmt.Errorf("a request went unanswered for %v", u.cfg.Timeout))
			}
		}
	}
}
