package admission

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Limiter admits at most Max at once, and at most PerClient from one
// client address. It is safe for concurrent use.
type Limiter struct {
	max, perClient int
	log            *slog.Logger
	msg            string // the log line's message

	mu       sync.Mutex
	total    int
	byClient map[string]int
	refused  uint64 // since the last log line
	all      uint64 // since the start
	loggedAt time.Time
}

// New returns a limiter; msg is the message of its log line, e.g. "tftp
// requests dropped, too many transfers". most and perClient below 1 count
// as 1.
func New(most, perClient int, log *slog.Logger, msg string) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{max: max(1, most), perClient: max(1, perClient), log: log, msg: msg, byClient: map[string]int{}}
}

// Admit takes a slot for host and returns the function that gives it back
// (safe to call more than once), or ok false when host or everyone is at
// the bound; then the refusal is counted and maybe logged.
func (l *Limiter) Admit(host string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cause := ""
	switch {
	case l.total >= l.max:
		cause = fmt.Sprintf("%d running in all (max %d)", l.total, l.max)
	case l.byClient[host] >= l.perClient:
		cause = fmt.Sprintf("%s has %d running (max %d per client)", host, l.byClient[host], l.perClient)
	}
	if cause != "" {
		l.refused++
		l.all++
		if now := time.Now(); now.Sub(l.loggedAt) >= time.Second {
			l.log.Warn(l.msg, "turned_away", l.refused, "last_cause", cause, "turned_away_total", l.all)
			l.refused, l.loggedAt = 0, now
		}
		return nil, false
	}
	l.total++
	l.byClient[host]++
	var once sync.Once
	return func() { once.Do(func() { l.release(host) }) }, true
}

func (l *Limiter) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byClient[host]--; l.byClient[host] <= 0 {
		delete(l.byClient, host)
	}
}

// Count is how many run now, in all and for host.
func (l *Limiter) Count(host string) (total, fromHost int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.byClient[host]
}

// Refused is how many Admit turned away since the start.
func (l *Limiter) Refused() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all
}

// HostOf is the client address a limit applies to: the IP of a UDP or TCP
// address, or whatever precedes the port.
func HostOf(a net.Addr) string {
	switch t := a.(type) {
	case *net.UDPAddr:
		return t.IP.String()
	case *net.TCPAddr:
		return t.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}
