package nbd

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// admission bounds the connections still in the handshake, in all and per
// client address. A connection that never finishes its handshake holds a
// goroutine and a 64 KiB reader until HandshakeTimeout; without a bound a
// connect flood from one host takes them all, and other machines' boots
// with them. Sessions past the handshake are not counted: a machine keeps
// its connection for as long as it runs.
type admission struct {
	max, perClient int
	log            *slog.Logger

	mu       sync.Mutex
	total    int
	byClient map[string]int
	// Refusals are counted and logged once a second at most.
	refused, refusedTotal uint64
	lastLine              time.Time
	lastCause             string
}

func newAdmission(max, perClient int, log *slog.Logger) *admission {
	return &admission{max: max, perClient: perClient, log: log, byClient: map[string]int{}}
}

// admit reserves a handshake slot for a connection from remote and returns
// the function that frees it (safe to call more than once), or nil when
// the connection must be closed unserved.
func (a *admission) admit(remote net.Addr) func() {
	host := hostOf(remote)
	a.mu.Lock()
	defer a.mu.Unlock()
	cause := ""
	switch {
	case a.total >= a.max:
		cause = fmt.Sprintf("%d connections in the handshake (max %d)", a.total, a.max)
	case a.byClient[host] >= a.perClient:
		cause = fmt.Sprintf("%s has %d connections in the handshake (max %d per client)", host, a.byClient[host], a.perClient)
	}
	if cause != "" {
		a.refused++
		a.refusedTotal++
		a.lastCause = cause
		if now := time.Now(); now.Sub(a.lastLine) >= time.Second {
			a.log.Warn("nbd connections closed unserved: too many handshakes at once", "closed", a.refused,
				"last_cause", cause, "total_closed", a.refusedTotal)
			a.refused, a.lastLine = 0, now
		}
		return nil
	}
	a.total++
	a.byClient[host]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.total--
			if a.byClient[host]--; a.byClient[host] <= 0 {
				delete(a.byClient, host)
			}
		})
	}
}

// handshaking is how many connections are in the handshake, in all and
// from host.
func (a *admission) handshaking(host string) (total, fromHost int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, a.byClient[host]
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
