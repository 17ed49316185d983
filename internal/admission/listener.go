package admission

import (
	"io"
	"net"
)

// LimitListener wraps ln so that a connection beyond lim's bounds, in all
// or from its client address, is closed at once, before anything is read
// from it. An admitted connection holds its slot until it is closed.
func LimitListener(ln net.Listener, lim *Limiter) net.Listener {
	return &limitListener{Listener: ln, lim: lim}
}

type limitListener struct {
	net.Listener
	lim *Limiter
}

// Accept returns the next connection within the bounds.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if release, ok := l.lim.Admit(HostOf(c.RemoteAddr())); ok {
			return &limitedConn{Conn: c, release: release}, nil
		}
		c.Close()
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// ReadFrom hands a body to the connection's own ReadFrom when it has one
// (a *net.TCPConn: sendfile or splice). net/http streams a file through
// the connection's ReadFrom only if the connection has one; without it
// every byte of a kernel or initrd would be copied through user space.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
