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

// The cursor starts at origin and wraps from the end of the range to its
// start. A server alone starts at the start of the range. Servers sharing
// a LAN and a lease store start at their own share of it (setOrigin), so
// that in a boot storm each offers addresses the others are not offering
// too, instead of all racing for the lowest free one and all but one
// losing its commit.

// pool is the allocator's free-address state; guarded by allocator.mu.
// Positions count addresses from origin, wrapping at the range's end.
type pool struct {
	start, end, origin uint32
	next               uint64    // position of the next address the cursor looks at
	freed              addrHeap  // positions below next whose address may be free again
	timers             timerHeap // when holds and declines run out
	parked             []uint32  // behind the cursor, reserved for another machine
}

func newPool(start, end uint32) pool { return pool{start: start, end: end, origin: start} }

// size is how many addresses the range holds.
func (p *pool) size() uint64 { return uint64(p.end-p.start) + 1 }

// pos is u's position; u is inside the range.
func (p *pool) pos(u uint32) uint64 {
	if u >= p.origin {
		return uint64(u - p.origin)
	}
	return uint64(p.end-p.origin) + 1 + uint64(u-p.start)
}

// addr is the address at position n < size.
func (p *pool) addr(n uint64) uint32 {
	if span := uint64(p.end-p.origin) + 1; n >= span {
		return p.start + uint32(n-span)
	}
	return p.origin + uint32(n)
}

// setOrigin moves the cursor's start to u and walks the range again from
// there; the full scan finds anything the new walk has not reached.
func (p *pool) setOrigin(u uint32) {
	if u == p.origin || u < p.start || u > p.end {
		return
	}
	p.origin, p.next, p.freed = u, 0, nil
}

// pushFreed offers u to the fast path again. Addresses at or past the cursor
// are skipped: the cursor gets to them anyway.
func (p *pool) pushFreed(u uint32) {
	if u < p.start || u > p.end {
		return
	}
	if n := p.pos(u); n < p.next {
		heap.Push(&p.freed, uint32(n))
	}
}

// expire returns addresses whose hold or decline ran out by now.
func (p *pool) expire(now time.Time) {
	for len(p.timers) > 0 && !now.Before(p.timers[0].at) {
		t := heap.Pop(&p.timers).(timer)
		p.pushFreed(t.u)
	}
}

// fastFree returns the first address from the origin that was never leased (has no lease
// record) and that mac may have now, or false when the fast path knows of
// none. mac has no reservation (the caller handles those).
func (a *allocator) fastFree(mac net.HardwareAddr, k macKey, now time.Time) (uint32, bool) {
	p := &a.pool
	p.expire(now)
	for len(p.freed) > 0 {
		u := p.addr(uint64(heap.Pop(&p.freed).(uint32)))
		if a.neverLeasedFor(mac, k, u, now) {
			return u, true
		}
	}
	for p.next < p.size() {
		u := p.addr(p.next)
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

// addrHeap is a min-heap of positions.
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
