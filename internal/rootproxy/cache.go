package rootproxy

import (
	"sync"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/mcast"
)

// chunkCache is the read cache of the base: the multicast Receiver
// assembles chunks into it, and unicast reads of whole clean chunks fill
// it too, so a machine whose network drops the group still reads each
// chunk of the base once. It keeps apart the chunks the Receiver is
// assembling, whose buffers are the Receiver's alone.
type chunkCache struct {
	mem *mcast.MemCache

	mu         sync.Mutex
	assembling []bool // by chunk: reserved by the Receiver
}

// newChunkCache holds bytes of a content of size bytes, in shared when it
// is not nil (bootfleet storm's emulated machines).
func newChunkCache(size int64, bytes int64, shared *mcast.SharedSlab) (*chunkCache, error) {
	slots := int(max(bytes/chunkwire.ChunkSize, 1))
	if n := int(chunkwire.Chunks(size)); slots > n {
		slots = max(n, 1)
	}
	var mem *mcast.MemCache
	var err error
	if shared != nil {
		mem, err = mcast.NewMemCacheOn(shared, size, slots)
	} else {
		mem, err = mcast.NewMemCache(size, slots)
	}
	if err != nil {
		return nil, err
	}
	return &chunkCache{mem: mem, assembling: make([]bool, chunkwire.Chunks(size))}, nil
}

// bytes is how much of the base the cache holds at once.
func (c *chunkCache) bytes() int64 { return int64(c.mem.Slots()) * chunkwire.ChunkSize }

func (c *chunkCache) Has(chunk uint32) bool { return c.mem.Has(chunk) }

func (c *chunkCache) Reserve(chunk uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.mem.Reserve(chunk)
	if ok && int(chunk) < len(c.assembling) {
		c.assembling[chunk] = true
	}
	return b, ok
}

func (c *chunkCache) Commit(chunk uint32, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem.Commit(chunk, n)
	if int(chunk) < len(c.assembling) {
		c.assembling[chunk] = false
	}
}

func (c *chunkCache) Release(chunk uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem.Release(chunk)
	if int(chunk) < len(c.assembling) {
		c.assembling[chunk] = false
	}
}

// fill caches a chunk read by unicast, unless it is cached already or the
// Receiver is assembling it.
func (c *chunkCache) fill(chunk uint32, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(chunk) >= len(c.assembling) || c.assembling[chunk] || c.mem.Has(chunk) {
		return
	}
	buf, ok := c.mem.Reserve(chunk)
	if !ok {
		return
	}
	copy(buf, b)
	c.mem.Commit(chunk, len(b))
}

// drop forgets chunk: the machine wrote into it.
func (c *chunkCache) drop(chunk uint32) { c.mem.Drop(chunk) }

func (c *chunkCache) ReadAt(p []byte, off int64) (int, error) { return c.mem.ReadAt(p, off) }
