package tftp

import (
	"container/list"
	"fmt"
	"io"
	"sync"
)

// Cache is a FileSystem that keeps file contents in memory, shared by all
// transfers, so a file is read from disk once however many clients fetch it
// at the same time or later.
//
// Every Open still opens the file in the underlying FileSystem, so its path
// rules and permissions apply each time and a changed file is noticed:
// entries are keyed by name, size and modification time. (A rewrite that
// keeps both size and modification time is not detected.) Only files whose
// File implements ModTimer are cached; others pass through.
//
// Memory is bounded: the bytes of all entries, including entries still being
// read and entries in use by transfers, never exceed the limit. Idle entries
// are evicted least recently used first. When a file does not fit even after
// evicting every idle entry, it is served uncached from the underlying file.
type Cache struct {
	fs       FileSystem
	maxBytes int64

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	byName  map[string]*cacheEntry // newest entry per name
	lru     list.List              // *cacheEntry with refs == 0, most recent first
	used    int64
	hits    uint64
	misses  uint64
}

type cacheKey struct {
	name  string
	size  int64
	mtime int64 // UnixNano
}

type cacheEntry struct {
	key   cacheKey
	data  []byte
	err   error
	ready chan struct{} // closed when data or err is set
	refs  int
	idle  *list.Element // in lru while refs == 0
	stale bool          // superseded or failed: drop when refs reaches 0
}

// CacheStats is a snapshot of cache usage.
type CacheStats struct {
	Entries  int
	Bytes    int64 // held in memory now, including entries in use
	MaxBytes int64
	Hits     uint64 // opens served from memory (including waits for a load in progress)
	Misses   uint64 // opens that read the file from the underlying FileSystem
}

// NewCache wraps fsys with a cache of at most maxBytes (must be positive;
// e.g. 1<<30 for 1 GiB).
func NewCache(fsys FileSystem, maxBytes int64) *Cache {
	return &Cache{fs: fsys, maxBytes: maxBytes, entries: map[cacheKey]*cacheEntry{}, byName: map[string]*cacheEntry{}}
}

// Stats returns current usage.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: len(c.entries), Bytes: c.used, MaxBytes: c.maxBytes, Hits: c.hits, Misses: c.misses}
}

// Open implements FileSystem.
func (c *Cache) Open(name string) (File, error) {
	f, err := c.fs.Open(name)
	if err != nil {
		return nil, err
	}
	mt, ok := f.(ModTimer)
	if !ok || f.Size() > c.maxBytes {
		return f, nil
	}
	key := cacheKey{name: name, size: f.Size(), mtime: mt.ModTime().UnixNano()}

	c.mu.Lock()
	e := c.entries[key]
	if e != nil {
		c.hits++
		c.acquire(e)
		c.mu.Unlock()
		f.Close()
		<-e.ready
		if e.err != nil {
			c.release(e)
			return nil, e.err
		}
		return c.handle(e), nil
	}
	if old := c.byName[name]; old != nil {
		c.drop(old) // the file changed on disk
	}
	if !c.reserve(key.size) {
		c.mu.Unlock()
		return f, nil
	}
	c.misses++
	e = &cacheEntry{key: key, ready: make(chan struct{}), refs: 1}
	c.entries[key] = e
	c.byName[name] = e
	c.used += key.size
	c.mu.Unlock()

	e.data, e.err = readFull(f)
	f.Close()
	if e.err != nil {
		c.mu.Lock()
		c.drop(e)
		c.mu.Unlock()
		close(e.ready)
		c.release(e)
		return nil, e.err
	}
	close(e.ready)
	return c.handle(e), nil
}

func (c *Cache) handle(e *cacheEntry) File {
	return &memFile{data: e.data, onClose: func() { c.release(e) }}
}

// acquire and the helpers below run with c.mu held, except release.
func (c *Cache) acquire(e *cacheEntry) {
	if e.refs == 0 && e.idle != nil {
		c.lru.Remove(e.idle)
		e.idle = nil
	}
	e.refs++
}

func (c *Cache) release(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs > 0 {
		return
	}
	if e.stale {
		c.used -= e.key.size
		e.data = nil
		return
	}
	e.idle = c.lru.PushFront(e)
}

// drop removes e from lookup; its memory is released now if idle, else when
// the last transfer using it closes.
func (c *Cache) drop(e *cacheEntry) {
	if e.stale {
		return
	}
	e.stale = true
	delete(c.entries, e.key)
	if c.byName[e.key.name] == e {
		delete(c.byName, e.key.name)
	}
	if e.refs == 0 {
		if e.idle != nil {
			c.lru.Remove(e.idle)
			e.idle = nil
		}
		c.used -= e.key.size
		e.data = nil
	}
}

// reserve evicts idle entries, least recently used first, until size more
// bytes fit. It reports false (evicting nothing) if they cannot fit.
func (c *Cache) reserve(size int64) bool {
	var idle int64
	for el := c.lru.Front(); el != nil; el = el.Next() {
		idle += el.Value.(*cacheEntry).key.size
	}
	if c.used-idle+size > c.maxBytes {
		return false
	}
	for c.used+size > c.maxBytes {
		c.drop(c.lru.Back().Value.(*cacheEntry))
	}
	return true
}

func readFull(f File) ([]byte, error) {
	b := make([]byte, f.Size())
	const chunk = 1 << 20
	for off := 0; off < len(b); off += chunk {
		end := min(off+chunk, len(b))
		if n, err := f.ReadAt(b[off:end], int64(off)); n < end-off {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("caching file: read at offset %d: %w", off, err)
		}
	}
	return b, nil
}
