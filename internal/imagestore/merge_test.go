package imagestore

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMergeWhileReading: a version three layers deep is merged into a
// whole file while a reader reads it through its layers; every read sees
// the version's bytes, before, during and after, and the merged content
// is whole, hashed as before, and reported as it goes.
func TestMergeWhileReading(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	content := bytes.Repeat([]byte("merge me "), 1<<21) // 18 MiB
	res, err := s.ImportContext(ctx, bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		content = bytes.Clone(content)
		copy(content[(i+1)<<22:], "changed in this version")
		if res, err = s.ImportOver(ctx, bytes.NewReader(content), res.SHA256); err != nil || res.Parent == "" {
			t.Fatalf("layer %d: %+v, %v", i, res, err)
		}
	}
	top := res.SHA256
	r, err := s.OpenReader(top)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := make([]byte, 1<<20)
		for i := int64(0); !stop.Load() || i < 18; i++ {
			off := (i * 7 << 20) % int64(len(content)-len(p))
			if _, err := r.ReadAt(p, off); err != nil || !bytes.Equal(p, content[off:off+int64(len(p))]) {
				bad.Store(off)
				return
			}
		}
	}()
	var reports atomic.Int32
	merged, err := s.Merge(ctx, top, func(done, total int64) { reports.Add(1) })
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if off := bad.Load(); off != nil {
		t.Fatalf("a read at %d during the merge differs from the version", off)
	}
	if c, err := s.Chain(top); err != nil || len(c.Layers) != 0 || merged.Size != int64(len(content)) {
		t.Fatalf("after merge the chain is %+v (%v), merged %+v; want it whole", c, err, merged)
	}
	if reports.Load() < 18 {
		t.Fatalf("%d progress reports for 18 MiB, want one per MiB", reports.Load())
	}
	r2, err := s.OpenReader(top)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	got := make([]byte, len(content))
	if _, err := r2.ReadAt(got, 0); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the merged content differs: %v", err)
	}
}
