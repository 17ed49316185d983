package dhcp

import (
	"net"
	"sync"
	"time"
)

// Per-client limits. Firmware retransmits a DISCOVER after 1 to 4 s and a
// whole DORA is four packets, so a healthy client never comes near them; a
// client stuck in a loop (a broken firmware, a misconfigured agent) that
// sends hundreds a second would otherwise take workers, lease-store writes
// and telemetry from every other machine.
const (
	perClientRate  = 10 // packets a second, sustained
	perClientBurst = 20 // packets at once
	// maxTrackedClients bounds the limiter's memory. Past it (a flood of
	// forged MACs, which a per-client limit cannot stop anyway) new MACs
	// pass untracked rather than being dropped.
	maxTrackedClients = 1 << 16
	// idleForget is how long an unused bucket is kept: by then it is full.
	idleForget = time.Duration(perClientBurst/perClientRate+1) * time.Second
)

// clientLimiter is a token bucket per client hardware address.
type clientLimiter struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens   float64
	last     time.Time
	dropping bool // reported since the bucket last had a token
}

// allow takes a token for mac at now. first is true on the first packet
// dropped since the client last kept within its limit, so the flood is
// logged once per episode, not once per packet.
func (l *clientLimiter) allow(mac net.HardwareAddr, now time.Time) (ok, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	if now.Sub(l.lastSweep) > idleForget || now.Before(l.lastSweep) {
		for k, b := range l.buckets {
			if now.Sub(b.last) > idleForget {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, found := l.buckets[string(mac)]
	if !found {
		if len(l.buckets) >= maxTrackedClients {
			return true, false
		}
		b = &bucket{tokens: perClientBurst, last: now}
		l.buckets[string(mac)] = b
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(perClientBurst, b.tokens+dt.Seconds()*perClientRate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		b.dropping = false
		return true, false
	}
	first = !b.dropping
	b.dropping = true
	return false, first
}
