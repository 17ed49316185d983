package tftp

import (
	"container/list"
	"fmt"
	"io"
	"sync"
)

// Cache is a FileSystem that keeps file contents in memory, shared by all
// transfers, so a file is loaded from disk once however many clients fetch
// it. A file is loaded, in the background, at its second Open; the first
// transfers, and any that open it while it loads, read the file themselves.
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
	passed  uint64
	seen    map[cacheKey]struct{} // opened once and not loaded, at most maxSeen
	loading sync.WaitGroup        // loads in progress; tests wait on it
}

// maxSeen bounds the files remembered as opened once; past it the memory
// starts afresh, which only delays loading a file by one more Open.
const maxSeen = 4096

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
	Hits     uint64 // opens served from memory
	Misses   uint64 // opens that started loading a file into memory
	Passed   uint64 // opens that read the file itself: its first, and any while it loads
}

// NewCache wraps fsys with a cache of at most maxBytes (must be positive;
// e.g. 1<<30 for 1 GiB).
func NewCache(fsys FileSystem, maxBytes int64) *Cache {
	return &Cache{fs: fsys, maxBytes: maxBytes, entries: map[cacheKey]*cacheEntry{}, byName: map[string]*cacheEntry{},
		seen: map[cacheKey]struct{}{}}
}

// Stats returns current usage.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: len(c.entries), Bytes: c.used, MaxBytes: c.maxBytes, Hits: c.hits, Misses: c.misses, Passed: c.passed}
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
		select {
		case <-e.ready:
		default:
			// Still loading: read the file like the first transfer does
			// rather than wait for all of it, and move to memory once the
			// load is done.
			c.passed++
			c.acquire(e)
			c.mu.Unlock()
			return &loadingFile{File: f, c: c, e: e}, nil
		}
		c.hits++
		c.acquire(e)
		c.mu.Unlock()
		f.Close()
		if e.err != nil {
			c.release(e)
			return nil, e.err
		}
		return c.handle(e), nil
	}
	if old := c.byName[name]; old != nil {
		c.drop(old) // the file changed on disk
	}
	if _, again := c.seen[key]; !again {
		// A file fetched once (a one-off image, a size probe) is not worth
		// holding, and loading it beside its transfer would cost that
		// transfer CPU: remember it, and load it when it is asked again.
		c.remember(key)
		c.passed++
		c.mu.Unlock()
		return f, nil
	}
	delete(c.seen, key)
	if !c.reserve(key.size) {
		c.mu.Unlock()
		return f, nil
	}
	c.misses++
	e = &cacheEntry{key: key, ready: make(chan struct{}), refs: 2} // the loader's and this Open's
	c.entries[key] = e
	c.byName[name] = e
	c.used += key.size
	c.mu.Unlock()
	// The transfer that missed starts at once from the file, as an uncached
	// one does; loading hundreds of MiB first would hold its first block
	// back for as long as the load takes.
	c.loading.Go(func() { c.load(e) })
	return &loadingFile{File: f, c: c, e: e}, nil
}

// loadingFile is a handle on a file the cache is still loading. It reads
// the file itself; memory offers the contents once the load is done, so
// that the transfers of a boot storm, which all open the file before it
// is loaded, serve it from memory for the rest of the way. It holds a
// reference on the entry until Close.
type loadingFile struct {
	File
	c *Cache
	e *cacheEntry
}

// memory returns the whole file once it is loaded, else nil.
func (f *loadingFile) memory() []byte {
	select {
	case <-f.e.ready:
		if f.e.err == nil {
			return f.e.data
		}
	default:
	}
	return nil
}

func (f *loadingFile) Close() error {
	err := f.File.Close()
	f.c.release(f.e)
	return err
}

// load reads e's file into memory for the transfers that open it later.
// It opens the file again, so that the transfer that missed keeps its own
// handle, and gives up if the file is no longer the one e was made for.
func (c *Cache) load(e *cacheEntry) {
	f, err := c.fs.Open(e.key.name)
	if err == nil {
		if mt, ok := f.(ModTimer); !ok || f.Size() != e.key.size || mt.ModTime().UnixNano() != e.key.mtime {
			err = fmt.Errorf("caching file %s: it changed while being opened", e.key.name)
		} else {
			e.data, err = readFull(f)
		}
		f.Close()
	}
	if err != nil {
		e.err = err
		c.mu.Lock()
		c.drop(e)
		c.mu.Unlock()
	}
	close(e.ready)
	c.release(e)
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
		e := c.lru.Back().Value.(*cacheEntry)
		c.drop(e)
		c.remember(e.key) // it was wanted twice already: load it when asked again
	}
	return true
}

// remember notes that key was opened and is not held.
func (c *Cache) remember(key cacheKey) {
	if len(c.seen) >= maxSeen {
		clear(c.seen)
	}
	c.seen[key] = struct{}{}
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
