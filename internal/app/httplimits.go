package app

import (
	"log/slog"
	"net"
	"sync"
	"time"
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

// connLimiter is a listener that closes connections beyond its bounds at
// once, counting them in one log line a second at most.
type connLimiter struct {
	net.Listener
	max, perClient int
	log            *slog.Logger

	mu       sync.Mutex
	total    int
	byClient map[string]int
	refused  uint64
	loggedAt time.Time
}

func limitConns(ln net.Listener, max, perClient int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perClient: perClient, log: log, byClient: map[string]int{}}
}

// Accept returns the next connection within the bounds.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		if l.admit(host) {
			return &limitedConn{Conn: c, release: func() { l.release(host) }}, nil
		}
		c.Close()
	}
}

func (l *connLimiter) admit(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total < l.max && l.byClient[host] < l.perClient {
		l.total++
		l.byClient[host]++
		return true
	}
	l.refused++
	if now := time.Now(); now.Sub(l.loggedAt) >= time.Second {
		l.log.Warn("http connections closed unserved: too many open", "closed", l.refused, "last_client", host,
			"open", l.total, "open_from_client", l.byClient[host], "max", l.max, "max_per_client", l.perClient)
		l.refused, l.loggedAt = 0, now
	}
	return false
}

func (l *connLimiter) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byClient[host]--; l.byClient[host] <= 0 {
		delete(l.byClient, host)
	}
}

// open is how many connections are open, in all and from host.
func (l *connLimiter) open(host string) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.byClient[host]
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}
