package mcast

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// ErrNotCached means a read spans a chunk the cache does not hold.
var ErrNotCached = errors.New("mcast: chunk not cached")

// MemCache holds chunks of one content in a fixed number of slots
// allocated up front, so filling it and reading it allocate nothing: the
// agent serves the root's reads from it, and a block-device daemon must
// not wait on reclaim to answer the reads that reclaim itself needs. When
// every slot is taken, a new chunk evicts a committed one the readers have
// not used since the clock hand last passed (CLOCK); a chunk just
// committed counts as used, so read-ahead gets one turn of the hand to be
// read, and a chunk being assembled is never evicted.
type MemCache struct {
	size   int64
	shared *SharedSlab // nil: slab holds the slots

	mu    sync.Mutex
	slab  []byte
	index []int32 // slot of each chunk of the content, -1 for none
	slots []slot
	free  []int32
	hand  int
}

type slot struct {
	chunk uint32
	state uint8 // slotFree, slotAssembling, slotCommitted
	ref   bool  // read since the clock hand passed
	n     int32 // bytes of the committed chunk
}

const (
	slotFree = iota
	slotAssembling
	slotCommitted
)

// NewMemCache allocates slots chunks of chunkwire.ChunkSize for a content
// of size bytes, and an index of 4 bytes a chunk of the content (1 MiB for
// 8 GiB). slots is at least 1.
func NewMemCache(size int64, slots int) (*MemCache, error) {
	return newMemCache(size, slots, true)
}

func newMemCache(size int64, slots int, slab bool) (*MemCache, error) {
	if size < 0 || slots < 1 {
		return nil, fmt.Errorf("mcast: cache of %d slots for %d bytes, want at least one slot", slots, size)
	}
	c := &MemCache{
		size:  size,
		index: make([]int32, chunkwire.Chunks(size)),
		slots: make([]slot, slots),
		free:  make([]int32, slots),
	}
	if slab {
		c.slab = newSlab(c, slots*chunkwire.ChunkSize)
	}
	for i := range c.index {
		c.index[i] = -1
	}
	for i := range c.free {
		c.free[i] = int32(slots - 1 - i)
	}
	return c, nil
}

// Slots is how many chunks the cache holds at once.
func (c *MemCache) Slots() int { return len(c.slots) }

func (c *MemCache) buf(s int32) []byte {
	if c.shared != nil {
		return c.shared.chunk(c.slots[s].chunk)
	}
	return c.slab[int(s)*chunkwire.ChunkSize : int(s+1)*chunkwire.ChunkSize]
}

// SharedSlab is room for every chunk of one content at the chunk's own
// place, shared by the MemCaches of the machines bootfleet storm emulates
// in one process: 200 emulated machines, each caching hundreds of MiB of
// the same content, would need more RAM than the simulator's host has.
// Each cache keeps its own slots, index and eviction, so what a machine
// holds, misses and evicts is as with a slab of its own; only the bytes
// live once. Every writer writes the content's own bytes (fragments
// checked by their checksum, unicast reads of the base), so a chunk one
// machine assembles while another reads it reads the same bytes. An agent
// never uses one.
//
// Every machine of a storm assembles every chunk of the group, so each
// datagram would be written to the same place once per machine, 200 times
// the same KiB at N = 200: the slab remembers which fragments hold their
// bytes (frags) and a Receiver writes one only the first time (put). Its
// cache still counts the fragment and commits the chunk for itself.
type SharedSlab struct {
	size  int64
	b     []byte
	frags []atomic.Uint32 // by chunk: fragments whose bytes are in b
}

// NewSharedSlab maps room for a content of size bytes; pages are touched
// only where chunks are written.
func NewSharedSlab(size int64) *SharedSlab {
	s := &SharedSlab{size: size, frags: make([]atomic.Uint32, chunkwire.Chunks(size))}
	s.b = newSlab(s, int(chunkwire.Chunks(size))*chunkwire.ChunkSize)
	return s
}

// owns reports whether buf is chunk's place in s.
func (s *SharedSlab) owns(chunk uint32, buf []byte) bool {
	return len(buf) > 0 && int(chunk) < len(s.frags) && &buf[0] == &s.b[int(chunk)*chunkwire.ChunkSize]
}

// put writes payload, fragment frag of chunk, into buf, chunk's buffer:
// unless s (nil for a cache's own buffer) holds the fragment already.
// The fragment's checksum was right, so its bytes are the content's, the
// same whichever Receiver wrote them first.
func (s *SharedSlab) put(buf []byte, chunk uint32, frag uint8, payload []byte) {
	if s == nil {
		copy(buf[int(frag)*chunkwire.FragmentSize:], payload)
		return
	}
	bit := uint32(1) << frag
	f := &s.frags[chunk]
	if f.Load()&bit != 0 {
		return
	}
	copy(buf[int(frag)*chunkwire.FragmentSize:], payload)
	f.Or(bit)
}

func (s *SharedSlab) chunk(c uint32) []byte {
	return s.b[int(c)*chunkwire.ChunkSize : int(c+1)*chunkwire.ChunkSize]
}

// NewMemCacheOn is NewMemCache with its chunks' bytes in shared, which
// must be for a content of the same size.
func NewMemCacheOn(shared *SharedSlab, size int64, slots int) (*MemCache, error) {
	if shared == nil || shared.size != size {
		return nil, fmt.Errorf("mcast: cache for %d bytes on a shared slab %v: want one for the same size", size, shared)
	}
	c, err := newMemCache(size, slots, false)
	if err != nil {
		return nil, err
	}
	c.shared = shared
	return c, nil
}

// Has reports whether chunk is committed.
func (c *MemCache) Has(chunk uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed(chunk) >= 0
}

func (c *MemCache) committed(chunk uint32) int32 {
	if int64(chunk) >= int64(len(c.index)) {
		return -1
	}
	s := c.index[chunk]
	if s < 0 || c.slots[s].state != slotCommitted {
		return -1
	}
	return s
}

// Reserve returns the buffer chunk is assembled in: the one it already
// has while it is assembled, else a free or evicted slot. false when chunk
// is past the content, already committed, or every slot is assembling.
func (c *MemCache) Reserve(chunk uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(chunk) >= int64(len(c.index)) {
		return nil, false
	}
	if s := c.index[chunk]; s >= 0 {
		if c.slots[s].state == slotAssembling {
			return c.buf(s), true
		}
		return nil, false
	}
	s := c.take()
	if s < 0 {
		return nil, false
	}
	c.slots[s] = slot{chunk: chunk, state: slotAssembling}
	c.index[chunk] = s
	return c.buf(s), true
}

// take returns a free slot, or evicts one; -1 if all are assembling.
func (c *MemCache) take() int32 {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		return s
	}
	// Two turns of the hand: the first may only clear reference bits.
	for range 2 * len(c.slots) {
		s := int32(c.hand)
		c.hand = (c.hand + 1) % len(c.slots)
		sl := &c.slots[s]
		if sl.state != slotCommitted {
			continue
		}
		if sl.ref {
			sl.ref = false
			continue
		}
		c.index[sl.chunk] = -1
		return s
	}
	return -1
}

// Commit makes the assembled chunk readable; its first n bytes are the
// content.
func (c *MemCache) Commit(chunk uint32, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(chunk) >= int64(len(c.index)) {
		return
	}
	if s := c.index[chunk]; s >= 0 && c.slots[s].state == slotAssembling {
		c.slots[s].state, c.slots[s].n, c.slots[s].ref = slotCommitted, int32(n), true
	}
}

// Release gives back the slot of a chunk whose assembly was abandoned.
func (c *MemCache) Release(chunk uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(chunk) >= int64(len(c.index)) {
		return
	}
	if s := c.index[chunk]; s >= 0 && c.slots[s].state == slotAssembling {
		c.slots[s] = slot{}
		c.index[chunk] = -1
		c.free = append(c.free, s)
	}
}

// Drop evicts a committed chunk: the agent drops a chunk the machine
// wrote into, so no later read can take the base's bytes for its own.
func (c *MemCache) Drop(chunk uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.committed(chunk); s >= 0 {
		c.slots[s] = slot{}
		c.index[chunk] = -1
		c.free = append(c.free, s)
	}
}

// ReadAt copies the content at off into p from committed chunks. It reads
// all of p or nothing: ErrNotCached if a chunk p spans is not committed.
func (c *MemCache) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > c.size {
		return 0, fmt.Errorf("mcast: read of %d bytes at %d, content has %d", len(p), off, c.size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for done := 0; done < len(p); {
		at := off + int64(done)
		chunk := uint32(at / chunkwire.ChunkSize)
		s := c.committed(chunk)
		if s < 0 {
			// A miss is the agent's read path's everyday case, where it
			// must not allocate: the bare error.
			return 0, ErrNotCached
		}
		c.slots[s].ref = true
		in := int(at % chunkwire.ChunkSize)
		if in >= int(c.slots[s].n) {
			return 0, fmt.Errorf("mcast: chunk %d holds %d bytes, read wants offset %d in it", chunk, c.slots[s].n, in)
		}
		done += copy(p[done:], c.buf(s)[in:c.slots[s].n])
	}
	return len(p), nil
}
