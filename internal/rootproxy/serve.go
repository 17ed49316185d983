package rootproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// Serve serves the proxy on conn, the agent's end of the socket pair the
// kernel's NBD client holds the other end of, with internal/nbd's server,
// until the kernel disconnects or ctx ends. The kernel runs no handshake
// of its own: the agent runs it on its end (nbd.ClientHandshake, export
// ExportName) before handing that end to the kernel.
func (p *Proxy) Serve(ctx context.Context, conn net.Conn, cfg nbd.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ln := &oneConn{conn: &closeNotify{Conn: conn, closed: cancel}, done: ctx.Done()}
	return nbd.NewServer(p, cfg).Serve(ctx, ln)
}

// oneConn is a listener that accepts one connection, then waits for done.
type oneConn struct {
	mu   sync.Mutex
	conn net.Conn
	done <-chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error { return nil }

func (l *oneConn) Addr() net.Addr { return &net.UnixAddr{Name: "bootfleet-root-proxy", Net: "unix"} }

// closeNotify ends Serve once the server closes the session's connection.
type closeNotify struct {
	net.Conn
	closed func()
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.closed()
	return err
}

// SyscallConn keeps the socket's system calls reachable, so the server
// writes its replies with sendmsg as on a TCP connection.
func (c *closeNotify) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
