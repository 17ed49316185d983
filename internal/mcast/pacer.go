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

// pacer is a token bucket: tokens are bytes, refilled at rate per second
// up to burst. It is used by one goroutine.
type pacer struct {
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
}

func newPacer(rate, burst int64) *pacer {
	return &pacer{rate: float64(rate), burst: float64(burst), tokens: float64(burst), now: time.Now, sleep: sleepCtx}
}

// wait returns once n bytes may leave, or when ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	now := p.now()
	if !p.last.IsZero() {
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	}
	p.last = now
	p.tokens -= float64(n)
	if p.tokens >= 0 {
		return nil
	}
	// Sleep off the debt; the tokens refilled meanwhile are counted at the
	// next call from p.last, so a late wake-up is not lost.
	return p.sleep(ctx, time.Duration(-p.tokens/p.rate*float64(time.Second)))
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
