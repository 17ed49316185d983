package app

import (
	"log/slog"
	"net"

	"github.com/bootfleet/bootfleet/internal/admission"
)

// HTTP connection bounds. A machine boots over one or two connections;
// ReadHeaderTimeout ends a slow client's hold after 10 s, and these bound
// how many one host, or all hosts, can hold meanwhile (slowloris). The
// per-client bound leaves room for a benchmark host or a NAT in front of
// a few hundred machines.
const (
	httpMaxConns          = 8192
	httpMaxConnsPerClient = 256
	httpMaxHeaderBytes    = 64 << 10
)

// limitConns wraps ln so that it closes connections beyond the bounds at
// once.
func limitConns(ln net.Listener, most, perClient int, log *slog.Logger) net.Listener {
	return &connLimiter{Listener: ln, lim: admission.New(most, perClient, log, "http connections closed unserved: too many open")}
}

// connLimiter is a listener that admits connections through lim.
type connLimiter struct {
	net.Listener
	lim *admission.Limiter
}

// Accept returns the next connection within the bounds.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if release, ok := l.lim.Admit(admission.HostOf(c.RemoteAddr())); ok {
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
