package storm

import "time"

// iPXE's retry timer bounds (DEFAULT_MIN_TIMEOUT, DEFAULT_MAX_TIMEOUT).
const (
	ipxeMinTimeout = time.Second / 4
	ipxeMaxTimeout = 10 * time.Second
)

// retryTimer is iPXE's retry timer (net/retry.c) on a clock the caller
// passes in, so that a packet restarting it costs a few additions rather
// than a runtime timer: the timeout starts at 1/4 s, learns the spacing
// of the packets that stop it (t := 7t/8 + r/2), never below 1/4 s, and
// doubles on each expiry up to 10 s. An expiry makes the next stops that
// many skip the learning, as the time they measure includes a loss.
type retryTimer struct {
	start   time.Time
	timeout time.Duration
	count   int // expiries whose stop has not come yet
	running bool
}

// startNow starts the timer to expire at once, as iPXE's
// start_timer_nodelay does to send a first request.
func (t *retryTimer) startNow(now time.Time) {
	t.start, t.running = now, true
	t.timeout = 0
}

// restart is stop then start, as iPXE does after each packet it sends or
// takes.
func (t *retryTimer) restart(now time.Time) {
	if t.running {
		if t.count > 0 {
			t.count--
		} else {
			t.timeout += now.Sub(t.start)/2 - t.timeout/8
		}
	}
	t.start, t.running = now, true
	t.timeout = max(t.timeout, ipxeMinTimeout)
}

// deadline is when the timer expires; zero when it is stopped.
func (t *retryTimer) deadline() time.Time {
	if !t.running {
		return time.Time{}
	}
	return t.start.Add(t.timeout)
}

// expire stops the timer on its expiry and backs off. It reports
// whether the timeout had already reached its maximum, which is when a
// plain TFTP transfer gives up.
func (t *retryTimer) expire() (fail bool) {
	t.running = false
	t.count++
	t.timeout *= 2
	if t.timeout > ipxeMaxTimeout {
		t.timeout = ipxeMaxTimeout
		return true
	}
	return false
}
