package rootproxy

import "time"

// Every chunk one machine asks ahead goes to every machine of the group,
// and a machine that is not reading its socket (an emulated guest
// descheduled for seconds, one starting systemd on its only CPU) drops
// what overflows it: the chunks others wanted early become its own
// repairs later, or its fallback to unicast. So the read-ahead of a
// machine is a window that, like a congestion window, starts small,
// grows while what it asked arrives whole and is read, and is cut at the
// first sign that this machine does not keep up. A machine that cuts
// its window only asks less; it never holds back the reads or the
// read-ahead of the others.

// Window tuning. The hold is longer than the stalls that overflow a
// socket of a few MiB at a storm's rate, so a machine that stalls once
// keeps its hands off the group until it has caught up.
const (
	windowStart = 2               // the first window, and the one after a hold
	windowHold  = 2 * time.Second // no read-ahead after this machine's socket overflowed
	// windowCalm is how long after a cut further losses are taken as the
	// same event: a loss shows as a gap, then as a repair of it.
	windowCalm = 500 * time.Millisecond
)

// health is what the group has cost this machine so far: counters that
// only grow (mcast.ReceiverStats). A backlog of unread datagrams is not
// among them: mcast.Receiver.WantAhead asks nothing while one waits.
type health struct {
	Overflow uint64 // datagrams its socket dropped, full
	Lost     uint64 // datagrams missing from the sequence
	Repairs  uint64 // requests for lost fragments it sent
}

// window is the read-ahead of one machine, in chunks of the order past
// its reads. It is not safe for concurrent use.
type window struct {
	ceiling  int // the most it grows to; 0: no read-ahead
	size     int
	ssthresh int // below it each chunk used grows the window, above it each window's worth
	credit   int // chunks used since the window last grew, above ssthresh
	seen     health
	held     time.Time // no read-ahead before then
	lastCut  time.Time
}

func newWindow(ceiling int) *window {
	return &window{ceiling: ceiling, size: min(windowStart, ceiling), ssthresh: ceiling}
}

// lead returns how many chunks of the order past its reads the machine
// may have asked for now, given its health h: 0 while it does not keep
// up.
func (w *window) lead(h health, now time.Time) int {
	if w.ceiling == 0 {
		return 0
	}
	switch {
	case h.Overflow > w.seen.Overflow:
		// This machine could not read the group in time: whatever it
		// adds to the group lands first in its own full socket.
		w.ssthresh = max(w.size/2, 1)
		w.size, w.credit = 0, 0
		w.held, w.lastCut = now.Add(windowHold), now
	case (h.Lost > w.seen.Lost || h.Repairs > w.seen.Repairs) && now.Sub(w.lastCut) >= windowCalm:
		w.ssthresh = max(w.size/2, 1)
		w.size, w.credit = w.ssthresh, 0
		w.lastCut = now
	}
	w.seen = h
	if now.Before(w.held) {
		return 0
	}
	if w.size == 0 {
		w.size = min(windowStart, w.ceiling)
	}
	return w.size
}

// used notes that a chunk asked ahead arrived whole and was read: the
// window grows by one per chunk below ssthresh (doubling per window
// read), by one per window's worth above it.
func (w *window) used() {
	if w.size == 0 || w.size >= w.ceiling {
		return
	}
	if w.size < w.ssthresh {
		w.size++
		return
	}
	if w.credit++; w.credit >= w.size {
		w.size, w.credit = w.size+1, 0
	}
}
