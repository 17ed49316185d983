package rootproxy

import (
	"sync/atomic"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// MaxReadAhead bounds Config.ReadAhead: the chunks one read may add to
// every machine's stream on a guess.
const MaxReadAhead = 64

// readAhead follows the content's read order (Config.Order): on a miss,
// and when a chunk asked ahead is first read, it asks the group for the
// next chunks of the order the machine has neither cached nor asked for.
// The window so slides with the boot, a chunk asked per chunk used, and
// a boot that leaves the order stops asking at its first miss off it:
// at most k chunks asked ahead go unread.
type readAhead struct {
	order []uint32
	rank  map[uint32]int // position of each chunk in order
	k     int
	asked []atomic.Uint64 // a bit per chunk asked ahead and not read yet

	chunks, used atomic.Uint64
}

func newReadAhead(order []uint32, k int, size int64) *readAhead {
	if len(order) == 0 || k <= 0 {
		return nil
	}
	total := chunkwire.Chunks(size)
	a := &readAhead{rank: make(map[uint32]int, len(order)), k: min(k, MaxReadAhead),
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

// aheadOf asks the group for those of the next k chunks of the order,
// after the last of first..last it holds, that are neither cached nor
// asked already. The window counts cached chunks too, so the lead over
// the machine's reads stays k chunks of the order however fast the
// group fills them.
func (p *Proxy) aheadOf(first, last uint32) {
	a := p.ahead
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
	for _, n := range a.order[pos+1 : min(len(a.order), pos+1+a.k)] {
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
// used, and the window moves on past it.
func (p *Proxy) readFrom(first, last uint32) {
	if p.ahead == nil {
		return
	}
	for c := first; c <= last; c++ {
		if p.ahead.take(c) {
			p.ahead.used.Add(1)
			p.aheadOf(c, c)
		}
	}
}
