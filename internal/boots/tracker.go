package boots

import (
	"net"
	"sync"
	"time"
)

// StaleAfter is how long an unfinished boot stays open. A machine that
// never reported completion (it hung, or its OS has no DoneURL call) and
// sends DHCP again after this long starts a new boot.
const StaleAfter = time.Hour

// Tracker remembers when each machine's current boot began. It is safe for
// concurrent use and its methods are O(1), so DHCP can call it in the hot path.
type Tracker struct {
	now  func() time.Time
	mu   sync.Mutex
	open map[string]time.Time // MAC -> first DHCP packet of the current boot
}

// NewTracker returns an empty tracker. now may be nil for time.Now.
func NewTracker(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{now: now, open: map[string]time.Time{}}
}

// DHCPSeen notes a DHCP packet from mac. The first packet after the previous
// boot completed (or went stale) starts a new boot.
func (t *Tracker) DHCPSeen(mac net.HardwareAddr) {
	now := t.now()
	key := mac.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if start, ok := t.open[key]; !ok || now.Sub(start) > StaleAfter {
		t.open[key] = now
	}
}

// Complete ends mac's current boot and returns how long it took. ok is false
// when no boot was open (the OS called its DoneURL twice, or bootfleet was
// restarted mid-boot).
func (t *Tracker) Complete(mac net.HardwareAddr) (took time.Duration, ok bool) {
	now := t.now()
	key := mac.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	start, ok := t.open[key]
	if !ok {
		return 0, false
	}
	delete(t.open, key)
	return now.Sub(start), true
}
