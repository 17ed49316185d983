package mcast

import (
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// chunkKey names one chunk of one content.
type chunkKey struct {
	content chunkwire.ContentID
	chunk   uint32
}

// job is a pass over one chunk: the fragments in mask, in order.
type job struct {
	key  chunkKey
	mask uint32
}

// sent is the last pass over a chunk: when it started and what it sent.
type sent struct {
	at   time.Time
	mask uint32
}

// queue holds the chunks asked for and not sent yet, in the order first
// asked, at most once each, and remembers the passes of the last moments
// so that a request crossing the data it asks for does not send it twice.
// Read-ahead waits in a line of its own that moves only when no agent
// waits on a chunk: a guess never delays a read. It is guarded by the
// Sender's mutex.
type queue struct {
	order []chunkKey
	// ahead is read-ahead in the order asked. A chunk promoted to order
	// by a read stays here too, stale: isAhead says which entries count.
	ahead   []chunkKey
	isAhead map[chunkKey]bool
	pending map[chunkKey]uint32 // fragments still to send, by chunk
	recent  map[chunkKey]sent
}

func newQueue() *queue {
	return &queue{pending: map[chunkKey]uint32{}, recent: map[chunkKey]sent{}, isAhead: map[chunkKey]bool{}}
}

// add asks for the fragments in mask of k, as read-ahead if ahead. Unless
// repair, fragments whose pass started within suppress of now are left
// out. A read of a chunk queued as read-ahead moves it to the reads'
// line. It reports whether something was added and whether it merged
// into a queued job.
func (q *queue) add(k chunkKey, mask uint32, repair, ahead bool, now time.Time, suppress time.Duration) (added, merged bool) {
	if s, ok := q.recent[k]; ok && !repair && now.Sub(s.at) < suppress {
		mask &^= s.mask
	}
	if mask == 0 {
		return false, false
	}
	if m, ok := q.pending[k]; ok {
		q.pending[k] = m | mask
		if !ahead && q.isAhead[k] {
			delete(q.isAhead, k)
			q.order = append(q.order, k)
		}
		return true, true
	}
	q.pending[k] = mask
	if ahead {
		q.isAhead[k] = true
		q.ahead = append(q.ahead, k)
	} else {
		q.order = append(q.order, k)
	}
	return true, false
}

// pop takes the first key of line; false when it is empty.
func pop(line *[]chunkKey) (chunkKey, bool) {
	if len(*line) == 0 {
		return chunkKey{}, false
	}
	k := (*line)[0]
	(*line)[0] = chunkKey{}
	*line = (*line)[1:]
	if len(*line) == 0 {
		*line = (*line)[:0:0]
	}
	return k, true
}

// next takes the oldest job and records its pass as started now; false
// when the queue is empty.
func (q *queue) next(now time.Time, suppress time.Duration) (job, bool) {
	k, ok := pop(&q.order)
	for !ok {
		if k, ok = pop(&q.ahead); !ok {
			return job{}, false
		}
		// An entry whose chunk a read promoted, or that was sent since.
		ok = q.isAhead[k]
		delete(q.isAhead, k)
	}
	j := job{key: k, mask: q.pending[k]}
	delete(q.pending, k)
	q.recent[k] = sent{at: now, mask: j.mask}
	q.forget(now, suppress)
	return j, true
}

// forget drops passes older than suppress. The map holds what one
// suppress window sends, a few hundred chunks at a gigabit, so a sweep per
// pass is cheap.
func (q *queue) forget(now time.Time, suppress time.Duration) {
	if len(q.recent) < 64 {
		return
	}
	for k, s := range q.recent {
		if now.Sub(s.at) >= suppress {
			delete(q.recent, k)
		}
	}
}

// drop forgets every job and pass of content.
func (q *queue) drop(content chunkwire.ContentID) {
	kept := q.order[:0]
	for _, k := range q.order {
		if k.content != content {
			kept = append(kept, k)
		}
	}
	q.order = kept
	kept = q.ahead[:0]
	for _, k := range q.ahead {
		if k.content != content {
			kept = append(kept, k)
		}
	}
	q.ahead = kept
	for k := range q.isAhead {
		if k.content == content {
			delete(q.isAhead, k)
		}
	}
	for k := range q.pending {
		if k.content == content {
			delete(q.pending, k)
		}
	}
	for k := range q.recent {
		if k.content == content {
			delete(q.recent, k)
		}
	}
}
