package dhcp

import (
	"container/heap"
	"net"
	"time"
)

// The free-address search. A DISCOVER from a new machine must not scan the
// range from its start: with tens of thousands of leases and held offers that
// scan is the server's whole CPU budget. Instead a cursor walks the range
// once, and every address behind it that may become free again comes back
// through the freed heap, lowest first, so the order of offers stays "lowest
// never-leased address first" as with a scan.
//
// An address behind the cursor comes back when
//   - its hold runs out or the client takes another server's offer
//     (holdTimers, forgetOffer),
//   - its decline runs out (holdTimers),
//   - its lease record goes away (the machine moved to another address),
//   - gc runs, for addresses skipped because they were reserved for another
//     machine (the reservation may have been removed since).
//
// Anything the heap misses, the full scan in offerScan still finds: it runs
// when the fast path has nothing, before the pool is reported exhausted.

// pool is the allocator's free-address state; guarded by allocator.mu.
type pool struct {
	next   uint64    // next address the cursor looks at; > end when done
	freed  addrHeap  // addresses below next that may be free again
	timers timerHeap // when holds and declines run out
	parked []uint32  // behind the cursor, reserved for another machine
}

// pushFreed offers u to the fast path again. Addresses at or past the cursor
// are skipped: the cursor gets to them anyway.
func (p *pool) pushFreed(u uint32) {
	if uint64(u) < p.next {
		heap.Push(&p.freed, u)
	}
}

// expire returns addresses whose hold or decline ran out by now.
func (p *pool) expire(now time.Time) {
	for len(p.timers) > 0 && !now.Before(p.timers[0].at) {
		t := heap.Pop(&p.timers).(timer)
		p.pushFreed(t.u)
	}
}

// fastFree returns the lowest address that was never leased (has no lease
// record) and that mac may have now, or false when the fast path knows of
// none. mac has no reservation (the caller handles those).
func (a *allocator) fastFree(mac net.HardwareAddr, k macKey, now time.Time) (uint32, bool) {
	p := &a.pool
	p.expire(now)
	for len(p.freed) > 0 {
		u := heap.Pop(&p.freed).(uint32)
		if a.neverLeasedFor(mac, k, u, now) {
			return u, true
		}
	}
	for p.next <= uint64(a.end) {
		u := uint32(p.next)
		p.next++
		if a.neverLeasedFor(mac, k, u, now) {
			return u, true
		}
	}
	return 0, false
}

// neverLeasedFor reports whether u has no lease record and mac may have it.
// An address that is not free now is remembered by whatever will free it
// (the lease, the hold or decline timer); reserved ones are parked for gc.
func (a *allocator) neverLeasedFor(mac net.HardwareAddr, k macKey, u uint32, now time.Time) bool {
	if _, leased := a.byIP[u]; leased {
		return false
	}
	if a.usable(mac, k, nil, u, now) {
		return true
	}
	if u != a.server && u >= a.start && u <= a.end && a.offerFree(k, u, now) && !a.isDeclined(u, now) {
		// Not leased, not held, not declined: reserved for another machine.
		a.pool.parked = append(a.pool.parked, u)
	}
	return false
}

// unpark gives reserved addresses skipped by the cursor another chance; gc
// calls it, as reservations change rarely.
func (p *pool) unpark() {
	for _, u := range p.parked {
		p.pushFreed(u)
	}
	p.parked = p.parked[:0]
}

// addrHeap is a min-heap of addresses.
type addrHeap []uint32

func (h addrHeap) Len() int           { return len(h) }
func (h addrHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h addrHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *addrHeap) Push(x any)        { *h = append(*h, x.(uint32)) }
func (h *addrHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// timer says that address u may be free again at time at.
type timer struct {
	at time.Time
	u  uint32
}

// timerHeap is a min-heap of timers, earliest first. Entries go stale when a
// hold is renewed or dropped early; a stale entry only makes the fast path
// look at an address once more, which neverLeasedFor then rejects.
type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
