package tftp

import (
	"bytes"
	"errors"
	"io/fs"
	"sync"
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

func TestCacheReadsOnce(t *testing.T) {
	m := newMapFS()
	data := randBytes(1, 3<<20) // 3 chunks of 1 MiB
	m.put("f", data)
	c := NewCache(m, 10<<20)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := c.Open("f")
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if !bytes.Equal(readAllFile(t, f), data) {
				t.Error("content differs")
			}
		}()
	}
	wg.Wait()
	if m.reads != 3 {
		t.Fatalf("backing file read %d times, want 3 (one load of 3 chunks)", m.reads)
	}
	if st := c.Stats(); st.Misses != 1 || st.Hits != 49 || st.Bytes != int64(len(data)) {
		t.Fatalf("stats %+v", st)
	}
	if m.opens["f"] != 50 {
		t.Fatalf("backing FS opened %d times, want 50: every Open must re-check the file", m.opens["f"])
	}
}

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
		return f
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
	f1, _ := c.Open("f")
	m.put("f", []byte("version two!")) // new size and mtime
	f2, err := c.Open("f")
	if err != nil {
		t.Fatal(err)
	}
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
	f3, _ := c.Open("f")
	f3.Close()
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
