package mcast

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestSharedSlabKeepsEachCacheItsOwn: two caches on one SharedSlab hold,
// miss and evict each for itself; the bytes one assembled are what the
// other reads once it has committed the chunk too.
func TestSharedSlabKeepsEachCacheItsOwn(t *testing.T) {
	const size = 4*chunkwire.ChunkSize + 100
	shared := NewSharedSlab(size)
	a, err := NewMemCacheOn(shared, size, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMemCacheOn(shared, size, 2)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte{0xb7}, chunkwire.ChunkSize)
	fill := func(c *MemCache, chunk uint32) {
		t.Helper()
		buf, ok := c.Reserve(chunk)
		if !ok {
			t.Fatalf("reserve chunk %d: no slot", chunk)
		}
		copy(buf, content)
		c.Commit(chunk, chunkwire.ChunkSize)
	}
	fill(a, 2)
	if b.Has(2) {
		t.Fatal("b has chunk 2, which only a committed")
	}
	got := make([]byte, 64)
	if _, err := b.ReadAt(got, 2*chunkwire.ChunkSize); !errors.Is(err, ErrNotCached) {
		t.Fatalf("b read chunk 2: %v, want ErrNotCached", err)
	}
	fill(b, 2)
	fill(a, 3) // a has one slot: chunk 2 goes
	for _, tc := range []struct {
		name  string
		c     *MemCache
		chunk uint32
		want  bool
	}{
		{"a evicted 2", a, 2, false},
		{"a holds 3", a, 3, true},
		{"b keeps 2", b, 2, true},
		{"b never had 3", b, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Has(tc.chunk); got != tc.want {
				t.Fatalf("Has(%d) = %v, want %v", tc.chunk, got, tc.want)
			}
		})
	}
	if _, err := b.ReadAt(got, 2*chunkwire.ChunkSize+10); err != nil || !bytes.Equal(got, content[:64]) {
		t.Fatalf("b read chunk 2: %v, %x: want the bytes committed", err, got[:4])
	}
	if _, err := NewMemCacheOn(shared, size+1, 1); err == nil {
		t.Fatal("a cache for another size on the slab was allowed")
	}
}
