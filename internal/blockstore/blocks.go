package blockstore

import (
	"math/bits"

	"github.com/bootfleet/bootfleet/internal/blockset"
)

// Blocks is the set of blocks the overlay holds, written or trimmed to
// zeroes, in blocks of BlockSize, and log2 of BlockSize: what the agent
// must never read from its cache of the base. It walks the map under the
// read lock, a few milliseconds for a large disk, once per boot.
func (o *Overlay) Blocks() (*blockset.Set, uint8) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var s blockset.Set
	run := -1
	for blk, e := range o.entries {
		switch {
		case e != entryBase && run < 0:
			run = blk
		case e == entryBase && run >= 0:
			s.AddRange(uint64(run), uint64(blk-run))
			run = -1
		}
	}
	if run >= 0 {
		s.AddRange(uint64(run), uint64(len(o.entries)-run))
	}
	return &s, uint8(bits.TrailingZeros64(uint64(o.bs)))
}
