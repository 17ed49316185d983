package mcast

import (
	"slices"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// A receiver whose machine is busy (a guest starting systemd, a host that
// deschedules it) reads its socket late: the datagrams it would ask for
// may already wait there unread. Every decision that something did not
// arrive is therefore taken on the clock of what has been read, not the
// wall: a request it would send for them makes the server send them
// again, to every machine of the group.

// caughtUp is the time up to which everything that arrived has been read:
// now when the socket holds nothing unread, otherwise when the last datagram
// read arrived. r.mu is held.
func (r *Receiver) caughtUp(now time.Time) time.Time {
	if r.queued() == 0 || r.lastArrival.IsZero() || r.lastArrival.After(now) {
		return now
	}
	return r.lastArrival
}

// backlogged reports whether datagrams wait unread. r.mu is held.
func (r *Receiver) backlogged() bool { return r.queued() > 0 }

// deferAsk marks a, wanted at now, to be asked for once what arrived
// before now has been read. r.mu is held.
func (r *Receiver) deferAsk(a *assembly, now time.Time) {
	a.deferred = true
	if r.deferred == 0 || now.Before(r.oldestDeferred) {
		r.oldestDeferred = now
	}
	r.deferred++
}

// undefer forgets a's deferral, when it completed or failed. r.mu is held.
func (r *Receiver) undefer(a *assembly) {
	if a.deferred {
		a.deferred = false
		r.deferred--
	}
}

// askDeferred asks, at now, for the missing fragments of the deferred
// chunks wanted before upTo, everything before which has been read. r.mu
// is held.
func (r *Receiver) askDeferred(upTo, now time.Time) {
	if r.deferred == 0 || upTo.Before(r.oldestDeferred) {
		return
	}
	var due []uint32
	oldest := time.Time{}
	for c, a := range r.pend {
		switch {
		case !a.deferred:
		case !upTo.Before(a.asked):
			due = append(due, c)
		case oldest.IsZero() || a.asked.Before(oldest):
			oldest = a.asked
		}
	}
	slices.Sort(due)
	var ranges []chunkwire.Range
	for _, c := range due {
		a := r.pend[c]
		r.undefer(a)
		a.asked = now
		ranges = appendRange(ranges, c, a.need&^a.have)
	}
	r.oldestDeferred = oldest
	if len(ranges) > 0 {
		r.send(0, ranges)
	}
}
