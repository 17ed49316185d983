package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
)

// TestImportOver: a rebuilt image with a few changed blocks is stored as
// a layer of about those blocks, reads back as the upload through its
// parent, and a third version layers over the second. An upload that
// changes most blocks, or has another size, is stored whole.
func TestImportOver(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v1 := make([]byte, 16<<20)
	for i := range v1 {
		v1[i] = byte(i>>12) | 1 // no zero blocks: every block allocated
	}
	r1, err := s.ImportContext(ctx, bytes.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Clone(v1)
	copy(v2[5<<20:], bytes.Repeat([]byte("v2"), 100<<10)) // 200 KiB changed
	r2, err := s.ImportOver(ctx, bytes.NewReader(v2), r1.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Parent != r1.SHA256 || r2.Allocated > 512<<10 || r2.Size != int64(len(v2)) {
		t.Fatalf("second version: %+v; want a layer over the first of at most 512 KiB", r2)
	}
	v3 := bytes.Clone(v2)
	copy(v3[len(v3)-100:], "end of v3")
	r3, err := s.ImportOver(ctx, bytes.NewReader(v3), r2.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Chain(r3.SHA256)
	if err != nil || len(c.Layers) != 2 || c.BaseSHA != r1.SHA256 {
		t.Fatalf("chain of v3 = %+v (%v), want two layers over v1", c, err)
	}
	for _, tc := range []struct {
		sha  string
		want []byte
	}{{r1.SHA256, v1}, {r2.SHA256, v2}, {r3.SHA256, v3}} {
		r, err := s.OpenReader(tc.sha)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(r, 0, r.Size())); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.sha {
			t.Fatalf("content %.8s reads back hashing to %.8s", tc.sha, got)
		}
	}
	if got, _ := s.List(); len(got) != 3 {
		t.Fatalf("List = %v, want three contents", got)
	}
	if again, err := s.ImportContext(ctx, bytes.NewReader(v2)); err != nil || again.SHA256 != r2.SHA256 {
		t.Fatalf("importing layered content again whole: %+v, %v", again, err)
	}
	if _, err := s.Chain(r2.SHA256); err != nil {
		t.Fatal(err)
	}

	most := bytes.Clone(v1)
	for i := range most {
		most[i] ^= 0xff
	}
	if r, err := s.ImportOver(ctx, bytes.NewReader(most), r1.SHA256); err != nil || r.Parent != "" {
		t.Fatalf("an upload changing every block: %+v, %v; want it stored whole", r, err)
	}
	if r, err := s.ImportOver(ctx, bytes.NewReader(v1[:1<<20]), r1.SHA256); err != nil || r.Parent != "" {
		t.Fatalf("an upload of another size: %+v, %v; want it stored whole", r, err)
	}
	if err := s.Remove(r3.SHA256); err != nil || s.Has(r3.SHA256) {
		t.Fatalf("Remove of a layer: %v, still there %v", err, s.Has(r3.SHA256))
	}
}
