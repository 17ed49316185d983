package mcast

import (
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// WantAhead asks for chunks as read-ahead (chunkwire.FlagReadAhead), in
// the order given, and returns those it asked for, neither in the cache
// nor on their way, compacted in place at the front of chunks. The Sender sends them behind every chunk an
// agent waits on. They are not waited on and not repaired; a lost one is
// asked for again, as a read, when the machine reads it. While datagrams
// wait unread in the group's socket it asks for nothing, since they may
// hold these chunks, and read-ahead is never worth a chunk sent twice.
func (r *Receiver) WantAhead(chunks []uint32) []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gaveUp != nil || len(chunks) == 0 || r.queued() > 0 {
		return chunks[:0]
	}
	now := time.Now()
	total := chunkwire.Chunks(r.cfg.Size)
	ranges := r.aheadRanges[:0]
	asked := chunks[:0]
	for _, c := range chunks {
		if c >= total || r.pend[c] != nil || r.cfg.Cache.Has(c) || !r.room() {
			continue
		}
		a := r.start(c, now)
		if a == nil {
			break // the cache is full: so is read-ahead
		}
		ranges = appendRange(ranges, c, a.need)
		asked = append(asked, c)
	}
	r.aheadRanges = ranges
	if len(asked) > 0 {
		r.st.AheadChunks += uint64(len(asked))
		r.send(chunkwire.FlagReadAhead, ranges)
	}
	return asked
}
