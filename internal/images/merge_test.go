package images

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestMerges: a check merges a version stored deeper than MergeDepth,
// reporting progress; an asked merge of a retired version is refused.
func TestMerges(t *testing.T) {
	_, s, _ := newKernelFleet(t)
	s.cfg.MergeDepth = 1
	ctx := context.Background()
	content := bytes.Repeat([]byte("deep image "), 1<<20)
	var shas []string
	for i := range 3 {
		content = bytes.Clone(content)
		copy(content[i<<20:], "version")
		shas = append(shas, imported(t, s, "lab", content).Version.SHA256)
	}
	if c, _ := s.cfg.Blobs.Chain(shas[2]); len(c.Layers) != 2 {
		t.Fatalf("version 3 is %d layers deep, want 2", len(c.Layers))
	}
	s.Check(ctx)
	waitFor(t, "the check merges version 3", func() bool {
		ms := s.Merges()
		return len(ms) == 1 && !ms[0].Finished.IsZero()
	})
	m := s.Merges()[0]
	if m.Err != "" || m.Version != 3 || m.Done != m.Total || m.Total != int64(len(content)) {
		t.Fatalf("merge = %+v, want version 3 done", m)
	}
	if c, _ := s.cfg.Blobs.Chain(shas[2]); len(c.Layers) != 0 {
		t.Fatalf("after the merge version 3 is %d layers deep", len(c.Layers))
	}
	if _, err := s.Step(ctx, "lab", 1, inventory.OpRetire); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartMerge(ctx, "lab", 1); !errors.Is(err, inventory.ErrConflict) {
		t.Fatalf("merge of a retired version: %v, want a conflict", err)
	}
	if _, err := s.StartMerge(ctx, "lab", 9); !errors.Is(err, inventory.ErrNotFound) {
		t.Fatalf("merge of a missing version: %v", err)
	}
}
