package blockstore

import (
	"testing"

	"github.com/bootfleet/bootfleet/internal/blockset"
)

// TestOverlayBlocks: the set holds exactly the blocks written or trimmed,
// a partial write counting its whole block, and nothing of the base.
func TestOverlayBlocks(t *testing.T) {
	const bs = 4096
	base := randomBase(64*bs, 3)
	o := mustOpen(t, base, t.TempDir(), Persistent, Options{BlockSize: bs})
	defer o.Close()
	if s, shift := o.Blocks(); s.Blocks() != 0 || shift != 12 {
		t.Fatalf("fresh overlay: %d blocks, shift %d; want none, 12", s.Blocks(), shift)
	}
	if _, err := o.WriteAt(make([]byte, 10), 3*bs+100); err != nil {
		t.Fatal(err)
	}
	if _, err := o.WriteAt(make([]byte, 2*bs), 10*bs); err != nil {
		t.Fatal(err)
	}
	if err := o.Trim(63*bs, bs); err != nil {
		t.Fatal(err)
	}
	got, _ := o.Blocks()
	var want blockset.Set
	want.Add(3)
	want.AddRange(10, 2)
	want.Add(63)
	if !got.Equal(&want) {
		t.Fatalf("blocks %v, want %v", got.Extents(), want.Extents())
	}
}
