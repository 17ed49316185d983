package tftp

import (
	"bytes"
	"errors"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func readAllFile(t *testing.T, f File) []byte {
	t.Helper()
	b := make([]byte, f.Size())
	if n, _ := f.ReadAt(b, 0); n != len(b) {
		t.Fatalf("short read %d of %d", n, len(b))
	}
	return b
}

// TestCacheReadsOnce: the first Open reads the file itself and loads
// nothing; the second starts the load in the background and reads the file
// itself meanwhile; every later Open is served from memory.
func TestCacheReadsOnce(t *testing.T) {
	m := newMapFS()
	data := randBytes(1, 3<<20) // 3 chunks of 1 MiB
	m.put("f", data)
	c := NewCache(m, 10<<20)
	for i, wantReads := range []int{1, 1 + 1 + 3} { // its own read; then also the load's 3 chunks
		f, err := c.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, cached := f.(*memFile); cached {
			t.Fatalf("Open %d got memory, want it to read the file itself", i+1)
		}
		if !bytes.Equal(readAllFile(t, f), data) {
			t.Fatal("content differs")
		}
		f.Close()
		c.loading.Wait()
		if m.reads != wantReads {
			t.Fatalf("after Open %d the backing file was read %d times, want %d", i+1, m.reads, wantReads)
		}
	}
	reads := m.reads
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			f, err := c.Open("f")
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if _, cached := f.(*memFile); !cached {
				t.Error("Open after the load read the file, want memory")
			}
			if !bytes.Equal(readAllFile(t, f), data) {
				t.Error("content differs")
			}
		})
	}
	wg.Wait()
	if m.reads != reads {
		t.Fatalf("backing file read %d more times after the load, want none", m.reads-reads)
	}
	if st := c.Stats(); st.Misses != 1 || st.Hits != 48 || st.Passed != 1 || st.Bytes != int64(len(data)) {
		t.Fatalf("stats %+v", st)
	}
	if m.opens["f"] != 51 {
		t.Fatalf("backing FS opened %d times, want 51 (50 Opens and the load): every Open must re-check the file", m.opens["f"])
	}
}

// TestCachePassesWhileLoading: an Open during the load does not wait for
// it; it reads the file, and the next Open after the load gets memory.
func TestCachePassesWhileLoading(t *testing.T) {
	g := &gatedFS{mapFS: newMapFS(), gate: make(chan struct{})}
	data := randBytes(2, 3<<20)
	g.put("f", data)
	c := NewCache(g, 10<<20)
	var loading []*loadingFile
	for i := range 3 { // first sight, the load's start, one while it loads
		f, err := c.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, cached := f.(*memFile); cached {
			t.Fatalf("Open %d got memory before the load", i+1)
		}
		if !bytes.Equal(readAllFile(t, f), data) {
			t.Fatalf("Open %d: content differs", i+1)
		}
		if lf, ok := f.(*loadingFile); ok {
			if lf.memory() != nil {
				t.Fatalf("Open %d offers memory before the load is done", i+1)
			}
			loading = append(loading, lf)
		} else {
			f.Close()
		}
	}
	if len(loading) != 2 {
		t.Fatalf("%d handles can move to memory, want 2 (the load's start and the one during it)", len(loading))
	}
	close(g.gate)
	c.loading.Wait()
	for _, lf := range loading {
		if !bytes.Equal(lf.memory(), data) {
			t.Fatal("after the load a handle does not offer the contents")
		}
		lf.Close()
	}
	f, err := c.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, cached := f.(*memFile); !cached {
		t.Fatal("Open after the load read the file, want memory")
	}
	if st := c.Stats(); st.Misses != 1 || st.Passed != 2 || st.Hits != 1 {
		t.Fatalf("stats %+v, want 1 miss, 2 passed (first sight, during the load), 1 hit", st)
	}
}

// TestCacheSeenBounded: files opened once are remembered up to maxSeen;
// past that the memory starts afresh instead of growing.
func TestCacheSeenBounded(t *testing.T) {
	m := newMapFS()
	c := NewCache(m, 1<<20)
	for i := range maxSeen + 10 {
		name := strconv.Itoa(i)
		m.put(name, []byte(name))
		f, err := c.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if n := len(c.seen); n > maxSeen {
		t.Fatalf("%d files remembered, want at most %d", n, maxSeen)
	}
	if st := c.Stats(); st.Misses != 0 || st.Entries != 0 {
		t.Fatalf("stats %+v: files opened once must not be loaded", st)
	}
}

// gatedFS holds the cache's load until gate is closed: the loader reads
// in chunks of 1 MiB, a transfer's handle (readAllFile) the whole file.
type gatedFS struct {
	*mapFS
	gate chan struct{}
}

func (g *gatedFS) Open(name string) (File, error) {
	f, err := g.mapFS.Open(name)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, gate: g.gate}, nil
}

type gatedFile struct {
	File
	gate chan struct{}
}

func (f *gatedFile) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 1<<20 {
		<-f.gate
	}
	return f.File.ReadAt(p, off)
}

func (f *gatedFile) ModTime() time.Time { return f.File.(ModTimer).ModTime() }

func TestCacheBound(t *testing.T) {
	m := newMapFS()
	for _, n := range []string{"a", "b", "c", "d"} {
		m.put(n, randBytes(uint64(n[0]), 40_000))
	}
	m.put("huge", randBytes(9, 200_000))
	c := NewCache(m, 100_000)
	open := func(name string) File {
		t.Helper()
		f, err := c.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		c.loading.Wait()
		return f
	}
	for _, n := range []string{"a", "b", "c", "d", "huge"} {
		open(n).Close() // first sight: the next Open of each loads it
	}
	check := func(wantEntries int, wantBytes int64) {
		t.Helper()
		st := c.Stats()
		if st.Entries != wantEntries || st.Bytes != wantBytes {
			t.Fatalf("stats %+v, want %d entries and %d bytes", st, wantEntries, wantBytes)
		}
		if st.Bytes > st.MaxBytes {
			t.Fatalf("cache holds %d bytes, over its %d bound", st.Bytes, st.MaxBytes)
		}
	}
	open("a").Close()
	open("b").Close()
	check(2, 80_000)
	open("a").Close() // a is now most recent, b least
	open("c").Close() // evicts b
	check(2, 80_000)
	misses := c.Stats().Misses
	open("a").Close()
	if c.Stats().Misses != misses {
		t.Fatal("a was evicted, want the least recently used (b) evicted")
	}
	open("b").Close()
	if c.Stats().Misses != misses+1 {
		t.Fatal("b still cached, want it evicted")
	}

	// Entries in use are never evicted; a file that does not fit beside
	// them is served uncached.
	fa, fb := open("a"), open("b")
	before := c.Stats()
	fd := open("d")
	if _, cached := fd.(*memFile); cached {
		t.Fatal("d cached although a and b are in use and only 20000 bytes are free")
	}
	if !bytes.Equal(readAllFile(t, fd), m.files["d"]) {
		t.Fatal("uncached d content differs")
	}
	fd.Close()
	if st := c.Stats(); st.Bytes != before.Bytes || st.Bytes > 100_000 {
		t.Fatalf("stats %+v after uncached open, want unchanged %+v", st, before)
	}
	fa.Close()
	fb.Close()
	// Larger than the whole cache: passes through.
	fh := open("huge")
	if _, cached := fh.(*memFile); cached {
		t.Fatal("file larger than the cache was cached")
	}
	fh.Close()
	check(2, 80_000)
}

func TestCacheChangedFile(t *testing.T) {
	m := newMapFS()
	m.put("f", []byte("version one"))
	c := NewCache(m, 1<<20)
	open := func() File {
		t.Helper()
		f, err := c.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		c.loading.Wait()
		return f
	}
	open().Close() // first sight
	open().Close() // loads version one
	f1 := open()   // from memory, in use below
	if _, cached := f1.(*memFile); !cached {
		t.Fatal("second Open not served from memory")
	}
	m.put("f", []byte("version two!")) // new size and mtime
	open().Close()                     // first sight of version two
	f2 := open()
	if got := string(readAllFile(t, f2)); got != "version two!" {
		t.Fatalf("got %q after change, want the new content", got)
	}
	if got := string(readAllFile(t, f1)); got != "version one" {
		t.Fatalf("open handle changed under a transfer: %q", got)
	}
	if st := c.Stats(); st.Entries != 1 || st.Bytes != 23 {
		t.Fatalf("stats %+v: the stale entry is in use, so both count", st)
	}
	f1.Close()
	f2.Close()
	if st := c.Stats(); st.Entries != 1 || st.Bytes != 12 {
		t.Fatalf("stats %+v, want only the new version held", st)
	}
	m.mu.Lock()
	m.mtime["f"] = m.mtime["f"].Add(time.Second) // same size, new mtime
	m.mu.Unlock()
	misses := c.Stats().Misses
	open().Close()
	open().Close()
	if c.Stats().Misses != misses+1 {
		t.Fatal("mtime change not noticed")
	}
}

func TestCacheErrors(t *testing.T) {
	m := newMapFS()
	c := NewCache(m, 1<<20)
	if _, err := c.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error %v, want fs.ErrNotExist passed through", err)
	}
}

// TestTransferMovesToMemory: a transfer whose file finishes loading into
// the cache while it runs reads no more of the file after that; the
// client gets the same bytes. A lockstep transfer and a windowed one.
func TestTransferMovesToMemory(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts ClientOptions
	}{{"lockstep", ClientOptions{}}, {"windowsize 8", ClientOptions{WindowSize: 8}}} {
		t.Run(tt.name, func(t *testing.T) {
			sfs := &switchingFS{data: randBytes(7, 400*512), after: 50}
			addr, _, _ := startServer(t, Config{FS: sfs})
			got, err := fetch(testCtx(t, 20*time.Second), addr, "f", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, sfs.data) {
				t.Fatal("content differs")
			}
			if n := sfs.reads.Load(); n >= 200 {
				t.Fatalf("the file was read %d times for 401 blocks, want the reads to stop soon after the 50th, when memory is offered", n)
			}
		})
	}
}

// switchingFS serves one file whose handle offers the contents in memory
// after `after` reads, as a cache load that ends mid-transfer does.
type switchingFS struct {
	data  []byte
	after int64
	reads atomic.Int64
}

func (s *switchingFS) Open(string) (File, error) {
	return &switchingFile{memFile: memFile{data: s.data}, fs: s}, nil
}

type switchingFile struct {
	memFile
	fs *switchingFS
}

func (f *switchingFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	return f.memFile.ReadAt(p, off)
}

func (f *switchingFile) memory() []byte {
	if f.fs.reads.Load() >= f.fs.after {
		return f.fs.data
	}
	return nil
}
