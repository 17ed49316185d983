package mcast

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// fill reserves chunk, writes b into it and commits it.
func fill(t *testing.T, c *MemCache, chunk uint32, b []byte) {
	t.Helper()
	buf, ok := c.Reserve(chunk)
	if !ok {
		t.Fatalf("Reserve(%d): no slot", chunk)
	}
	copy(buf, b)
	c.Commit(chunk, len(b))
}

func TestMemCacheReadsWhatWasCommitted(t *testing.T) {
	const size = 2*chunkwire.ChunkSize + 100
	c, err := NewMemCache(size, 3)
	if err != nil {
		t.Fatal(err)
	}
	a := bytes.Repeat([]byte{'a'}, chunkwire.ChunkSize)
	b := bytes.Repeat([]byte{'b'}, chunkwire.ChunkSize)
	tail := bytes.Repeat([]byte{'t'}, 100)
	fill(t, c, 0, a)
	if _, err := c.ReadAt(make([]byte, 10), chunkwire.ChunkSize-5); !errors.Is(err, ErrNotCached) {
		t.Fatalf("read across a missing chunk: got %v, want %v", err, ErrNotCached)
	}
	fill(t, c, 1, b)
	fill(t, c, 2, tail)
	got := make([]byte, 20)
	if _, err := c.ReadAt(got, 2*chunkwire.ChunkSize-10); err != nil || string(got) != "bbbbbbbbbbtttttttttt" {
		t.Fatalf("read across chunks: %q, %v", got, err)
	}
	if _, err := c.ReadAt(make([]byte, 2), size-1); err == nil {
		t.Fatal("a read past the content succeeded")
	}
	if _, ok := c.Reserve(1); ok {
		t.Fatal("Reserve of a committed chunk gave a buffer")
	}
	if _, ok := c.Reserve(3); ok {
		t.Fatal("Reserve past the content gave a buffer")
	}
}

// TestMemCacheEvictsOnlyCommittedChunks: with every slot taken, a new
// chunk evicts a committed chunk not read since the hand passed, never
// one being assembled, and gets nothing when all are being assembled.
func TestMemCacheEvictsOnlyCommittedChunks(t *testing.T) {
	c, err := NewMemCache(10*chunkwire.ChunkSize, 2)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, 0, []byte("zero"))
	if _, ok := c.Reserve(1); !ok { // assembling, pinned
		t.Fatal("Reserve(1): no slot")
	}
	if _, ok := c.Reserve(2); !ok {
		t.Fatal("Reserve(2) should evict committed chunk 0")
	}
	if c.Has(0) {
		t.Fatal("chunk 0 still cached after its slot was taken")
	}
	if _, ok := c.Reserve(3); ok {
		t.Fatal("Reserve(3) got a slot though both are being assembled")
	}
	c.Release(1)
	if _, ok := c.Reserve(3); !ok {
		t.Fatal("Reserve(3): no slot after chunk 1 was released")
	}
}

// TestMemCacheClockKeepsWhatIsRead: a committed chunk gets one turn of
// the hand to be read; one read since the hand passed stays, one not read
// goes.
func TestMemCacheClockKeepsWhatIsRead(t *testing.T) {
	c, err := NewMemCache(10*chunkwire.ChunkSize, 3)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range uint32(4) { // the fourth clears every bit and evicts 0
		fill(t, c, chunk, make([]byte, chunkwire.ChunkSize))
	}
	if _, err := c.ReadAt(make([]byte, 1), chunkwire.ChunkSize); err != nil {
		t.Fatal(err) // chunk 1 is read: its bit is set again
	}
	fill(t, c, 4, make([]byte, chunkwire.ChunkSize))
	if c.Has(0) || !c.Has(1) || c.Has(2) || !c.Has(3) || !c.Has(4) {
		t.Fatalf("has 0-4: %v %v %v %v %v; want the read chunk 1 kept and the unread 2 evicted", c.Has(0), c.Has(1), c.Has(2), c.Has(3), c.Has(4))
	}
}

func TestNewMemCacheRefuses(t *testing.T) {
	if _, err := NewMemCache(100, 0); err == nil {
		t.Fatal("a cache of no slot was made")
	}
}

func TestMemCacheDropFreesTheSlot(t *testing.T) {
	c, err := NewMemCache(4*chunkwire.ChunkSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, 0, []byte("zero"))
	c.Drop(0)
	if c.Has(0) {
		t.Fatal("chunk 0 still cached after Drop")
	}
	if _, err := c.ReadAt(make([]byte, 4), 0); !errors.Is(err, ErrNotCached) {
		t.Fatalf("read of a dropped chunk: got %v, want %v", err, ErrNotCached)
	}
	fill(t, c, 1, []byte("one"))
	c.Drop(2) // not cached: nothing happens
	if !c.Has(1) {
		t.Fatal("chunk 1 not cached in the dropped chunk's slot")
	}
}
