package admission

import "net"

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
