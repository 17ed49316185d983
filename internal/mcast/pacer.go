package mcast

import (
	"context"
	"time"
)

// WireOverhead is what each datagram costs on an Ethernet link beyond its
// UDP payload: IPv4 and UDP headers (28), Ethernet header and FCS (18),
// preamble and inter-frame gap (20). The pacer counts it, so a rate is a
// share of the link as its speed is quoted.
const WireOverhead = 66

// Pacer is a token bucket: tokens are bytes, refilled at rate per second
// up to burst. It is used by one goroutine. The root's Sender and the PXE
// MTFTP carousel (package mtftp) each hold one, so together they may send
// twice multicast.rate.
type Pacer struct {
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
}

// TimerSlack is how late a short sleep may wake: Go's timers wake within
// about a millisecond when the process is otherwise idle (measured here:
// 20 µs sleeps took 1.0 ms, 430 µs ones 1.2 ms).
const TimerSlack = 2 * time.Millisecond

// Burst is the bucket a pacer at rate bytes per second needs so that a
// late wake-up does not lower the rate: TimerSlack's worth of bytes, and
// at least 16 datagrams of size bytes. A bucket smaller than what the
// rate brings in one late wake-up drops the rest, which held a 500M
// group to a few hundred Mbit/s.
func Burst(rate int64, size int) int64 {
	return max(16*int64(size), rate*int64(TimerSlack)/int64(time.Second))
}

// NewPacer paces at rate bytes per second with bursts of up to burst
// bytes; count WireOverhead in each datagram's size.
func NewPacer(rate, burst int64) *Pacer {
	return &Pacer{rate: float64(rate), burst: float64(burst), tokens: float64(burst), now: time.Now, sleep: sleepCtx}
}

// Wait returns once n bytes may leave, or when ctx ends.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	now := p.now()
	if !p.last.IsZero() {
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	}
	p.last = now
	p.tokens -= float64(n)
	if p.tokens >= 0 {
		return nil
	}
	// Sleep off the debt and half a burst more, so the next few sends go
	// without a wake-up each: at a storm's rate a timer per datagram cost
	// more CPU than the sending. The tokens refilled meanwhile are counted
	// at the next call from p.last, so neither the extra sleep nor a late
	// wake-up lowers the rate.
	return p.sleep(ctx, time.Duration((p.burst/2-p.tokens)/p.rate*float64(time.Second)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
