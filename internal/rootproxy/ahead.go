package rootproxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// MaxReadAhead bounds Config.ReadAhead, the ceiling of a machine's
// read-ahead window: the chunks one read may add to every machine's
// stream on a guess.
const MaxReadAhead = 64

// readAhead follows the content's read order (Config.Order): on a miss,
// and when a chunk asked ahead is first read, it asks the group for the
// next chunks of the order the machine has neither cached nor asked for.
// The window so slides with the boot, a chunk asked per chunk used, and
// a boot that leaves the order stops asking at its first miss off it:
// at most a window of chunks asked ahead go unread. How far ahead is the
// window's, which shrinks while this machine does not keep up with the
// group.
type readAhead struct {
	order []uint32
	rank  map[uint32]int  // position of each chunk in order
	asked []atomic.Uint64 // a bit per chunk asked ahead and not read yet

	mu  sync.Mutex
	win *window

	chunks, used atomic.Uint64
}

func newReadAhead(order []uint32, k int, size int64) *readAhead {
	if len(order) == 0 || k <= 0 {
		return nil
	}
	total := chunkwire.Chunks(size)
	a := &readAhead{rank: make(map[uint32]int, len(order)), win: newWindow(min(k, MaxReadAhead)),
		asked: make([]atomic.Uint64, (total+63)/64)}
	for _, c := range order {
		if c >= total {
			continue // an order of another size of the content: not ours
		}
		if _, dup := a.rank[c]; !dup {
			a.rank[c] = len(a.order)
			a.order = append(a.order, c)
		}
	}
	return a
}

func (a *readAhead) isAsked(c uint32) bool {
	return a.asked[c/64].Load()&(1<<(c%64)) != 0
}

// take clears c's bit; true if it was set.
func (a *readAhead) take(c uint32) bool {
	bit := uint64(1) << (c % 64)
	return a.asked[c/64].And(^bit)&bit != 0
}

// aheadOf asks the group for those of the next chunks of the order, as
// many as the window allows, after the last of first..last it holds,
// that are neither cached nor asked already. The window counts cached
// chunks too, so the lead over the machine's reads stays the window's
// size in chunks of the order however fast the group fills them.
func (p *Proxy) aheadOf(first, last uint32) {
	a := p.ahead
	rs := p.rcv.Stats()
	a.mu.Lock()
	k := a.win.lead(health{Overflow: rs.Overflow, Lost: rs.Lost, Repairs: rs.Repairs}, time.Now())
	a.mu.Unlock()
	if k == 0 {
		return
	}
	pos, ok := -1, false
	for c := last; !ok && c >= first; c-- {
		pos, ok = a.rank[c]
		if c == 0 {
			break
		}
	}
	if !ok {
		return
	}
	var buf [MaxReadAhead]uint32
	list := buf[:0]
	for _, n := range a.order[pos+1 : min(len(a.order), pos+1+k)] {
		c0 := int64(n) * chunkwire.ChunkSize
		if a.isAsked(n) || p.cache.Has(n) || p.isDirty(c0, min(chunkwire.ChunkSize, p.info.Size-c0)) {
			continue
		}
		list = append(list, n)
	}
	if len(list) == 0 {
		return
	}
	for _, n := range p.rcv.WantAhead(list) {
		a.asked[n/64].Or(1 << (n % 64))
		a.chunks.Add(1)
	}
}

// readFrom notes a read of chunks first..last: a chunk asked ahead is
// used, which grows the window, and the window moves on past it.
func (p *Proxy) readFrom(first, last uint32) {
	if p.ahead == nil {
		return
	}
	for c := first; c <= last; c++ {
		if p.ahead.take(c) {
			p.ahead.used.Add(1)
			p.ahead.mu.Lock()
			p.ahead.win.used()
			p.ahead.mu.Unlock()
			p.aheadOf(c, c)
		}
	}
}
