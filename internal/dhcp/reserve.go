package dhcp

import (
	"fmt"
	"net"
	"time"
)

// Enrolled is what a Machines may also say: whether a machine was set up
// by an admin (listed in the config or enrolled in the inventory), as
// opposed to discovered by booting or never seen. Without it every
// machine counts as enrolled and no address is held back.
type Enrolled interface {
	Enrolled(mac net.HardwareAddr) bool
}

// reserveRefresh is how long a count of the free addresses is trusted;
// between counts, every address handed out lowers it, so it can only be
// too low (an expiry it has not seen yet), never too high.
const reserveRefresh = 100 * time.Millisecond

// reserve keeps the last addresses of the pool for enrolled machines: a
// flood of DISCOVERs from random MACs holds an address per MAC for a
// minute (offerHold) and would otherwise leave the lab's own machines
// with nothing. Its counters are guarded by the allocator's mu.
type reserve struct {
	keep      int // addresses kept for enrolled machines; 0: none
	free      int // free addresses at the last count, less those handed out since
	countedAt time.Time
	refused   uint64 // DISCOVERs refused since the last log line
	loggedAt  time.Time
}

// reserveFor is Config.Reserve with its default, a tenth of the pool;
// never the whole pool.
func reserveFor(cfg *Config) int {
	size := int(ip2u(cfg.RangeEnd) - ip2u(cfg.RangeStart) + 1)
	switch {
	case cfg.Reserve < 0:
		return 0
	case cfg.Reserve == 0:
		return size / 10
	}
	return min(cfg.Reserve, size-1)
}

// allowFresh says whether mac may take an address nobody holds. Called with
// a.mu held, before a fresh address is picked.
func (a *allocator) allowFresh(mac net.HardwareAddr, now time.Time) error {
	if a.reserve.keep == 0 {
		return nil
	}
	if e, ok := a.machines.(Enrolled); !ok || e.Enrolled(mac) {
		return nil
	}
	r := &a.reserve
	if now.Sub(r.countedAt) >= reserveRefresh || now.Before(r.countedAt) {
		r.free, r.countedAt = a.countFree(now), now
	}
	if r.free > r.keep {
		return nil
	}
	r.refused++
	return fmt.Errorf("%w: %d free addresses left, kept for enrolled machines (dhcp reserve %d); %s is not enrolled",
		errReserved, r.free, r.keep, mac)
}

// tookFresh lowers the free count after a fresh address went out.
func (a *allocator) tookFresh() {
	if a.reserve.free > 0 {
		a.reserve.free--
	}
}

// countFree counts the addresses of the pool that no lease, offer or
// decline holds now. Called with a.mu held.
func (a *allocator) countFree(now time.Time) int {
	live := func(u uint32) bool {
		l, ok := a.byIP[u]
		return ok && now.Before(l.Expiry)
	}
	used := 0
	for u := range a.byIP {
		if u >= a.start && u <= a.end && live(u) {
			used++
		}
	}
	offered := func(u uint32) bool {
		o, ok := a.offers[u]
		return ok && now.Before(o.until)
	}
	for u := range a.offers {
		if !live(u) && offered(u) {
			used++
		}
	}
	for u, until := range a.declined {
		if now.Before(until) && !live(u) && !offered(u) {
			used++
		}
	}
	size := int(a.end - a.start + 1)
	if a.server >= a.start && a.server <= a.end {
		size--
	}
	return max(0, size-used)
}

// reserveLogDue returns how many DISCOVERs the reserve refused since the
// last log line, and whether a line is due (one a second at most).
func (a *allocator) reserveLogDue(now time.Time) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &a.reserve
	if now.Sub(r.loggedAt) < time.Second {
		return 0, false
	}
	n := r.refused
	r.refused, r.loggedAt = 0, now
	return n, true
}
