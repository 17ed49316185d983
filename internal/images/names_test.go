package images

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// fakeKernels records the content whose kernels were removed.
type fakeKernels struct {
	mu      sync.Mutex
	removed []string
}

func (k *fakeKernels) Remove(sha string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.removed = append(k.removed, sha)
	return nil
}

func (k *fakeKernels) gone(sha string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.removed, sha)
}

// newKernelFleet is newFleet with its service, which removes kernels
// from k.
func newKernelFleet(t *testing.T) (*fleet, *Service, *fakeKernels) {
	f := newFleet(t)
	s := f.service(time.Second)
	k := &fakeKernels{}
	s.cfg.Kernels = k
	return f, s, k
}

func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// holders returns the servers recorded as holding sha.
func (f *fleet) holders(sha string) []string {
	f.t.Helper()
	copies, err := f.store.ListImageCopies(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, c := range copies {
		if c.SHA256 == sha {
			out = append(out, c.Server)
		}
	}
	return out
}

// imported imports body as name through s.
func imported(t *testing.T, s *Service, name string, body []byte) Imported {
	t.Helper()
	res, err := s.Import(context.Background(), Upload{Name: name, Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("import %s: %v", name, err)
	}
	return res
}

// failAfter reads n bytes of zeros, then fails with err.
type failAfter struct {
	n   int
	err error
}

func (r *failAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(r.n, len(p))
	clear(p[:k])
	r.n -= k
	return k, nil
}

var (
	contentA = []byte("image content A, a tiny raw root")
	contentB = []byte("image content B, the one before")
	errRead  = errors.New("connection reset by peer")
)

// TestImport: what an import records, and what it does with the content
// the name pointed to before.
func TestImport(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fleet, s *Service) // before alpine is imported
		image string                                   // default alpine
		body  io.Reader                                // default contentA
		// wantErr is what the error wraps; nil for success.
		wantErr      error
		wantReplaced bool
		// oldKept is whether content B, which alpine named before, is
		// still here afterwards (only for setups that import it).
		oldKept bool
	}{
		{name: "new name"},
		// The earlier version stays production, to roll back to.
		{name: "new content for a name", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "alpine", contentB)
		}, wantReplaced: true, oldKept: true},
		{name: "old version retired", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "alpine", contentB)
			imported(t, s, "alpine", []byte("a third content, current when version 1 retires"))
			if _, err := s.Step(context.Background(), "alpine", 1, inventory.OpRetire); err != nil {
				t.Fatal(err)
			}
		}, wantReplaced: true},
		{name: "old content booted from", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "alpine", contentB)
			f.boots.set(hexSum(contentB), true)
		}, wantReplaced: true, oldKept: true},
		{name: "old content has another name", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "alpine", contentB)
			imported(t, s, "arch", contentB)
		}, wantReplaced: true, oldKept: true},
		{name: "same content again", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "alpine", contentA)
		}, wantReplaced: true},
		{name: "bad name", image: "no spaces", wantErr: inventory.ErrInvalid},
		{name: "empty upload", body: bytes.NewReader(nil), wantErr: ErrRefused},
		{name: "upload fails before a byte", body: &failAfter{err: errRead}, wantErr: ErrRefused},
		{name: "upload fails midway", body: &failAfter{n: 10, err: errRead}, wantErr: errRead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s, k := newKernelFleet(t)
			if tt.setup != nil {
				tt.setup(t, f, s)
			}
			image, body := cmp.Or(tt.image, "alpine"), tt.body
			if body == nil {
				body = bytes.NewReader(contentA)
			}
			res, err := s.Import(context.Background(), Upload{Name: image, Body: body})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Import = %v, want an error wrapping %v", err, tt.wantErr)
				}
				if tt.wantErr == errRead && errors.Is(err, ErrRefused) {
					t.Fatalf("Import = %v: a read error after bytes arrived is not the uploader's", err)
				}
				if _, err := f.store.GetImage(context.Background(), image); !errors.Is(err, inventory.ErrNotFound) {
					t.Fatalf("after a failed import, GetImage = %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := hexSum(contentA)
			got, err := f.store.GetImage(context.Background(), image)
			if err != nil || got.SHA256 != a || res.Image.SHA256 != a || res.Replaced != tt.wantReplaced {
				t.Fatalf("Import = %+v, stored %+v (%v); want %s, replaced %v", res, got, err, a, tt.wantReplaced)
			}
			if !f.blobs.Has(a) || !slices.Contains(f.holders(a), "self") {
				t.Fatalf("content here %v, holders %v; want it here and recorded", f.blobs.Has(a), f.holders(a))
			}
			b := hexSum(contentB)
			if tt.setup == nil || tt.name == "same content again" {
				return
			}
			if kept := f.blobs.Has(b); kept != tt.oldKept {
				t.Fatalf("old content here = %v, want %v", kept, tt.oldKept)
			}
			if held := slices.Contains(f.holders(b), "self"); held != tt.oldKept {
				t.Fatalf("old content recorded as held = %v, want %v", held, tt.oldKept)
			}
			if k.gone(b) == tt.oldKept {
				t.Fatalf("kernels of the old content removed = %v, want %v", k.gone(b), !tt.oldKept)
			}
		})
	}
}

// TestRemove: which removals delete the content. Another server's copy
// stays recorded: that server deletes it at its own check.
func TestRemove(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, f *fleet, s *Service) // after alpine is imported
		remove  string
		wantErr error // what the error wraps
		// named and kept: alpine still named, its content still here.
		named, kept bool
	}{
		{name: "last name", remove: "alpine"},
		{name: "name a profile uses", setup: func(t *testing.T, f *fleet, s *Service) {
			p := inventory.Profile{Name: "diskless", Kernel: "/k", Root: inventory.Root{Image: "alpine"}}
			if _, err := f.store.CreateProfile(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}, remove: "alpine", wantErr: inventory.ErrConflict, named: true, kept: true},
		{name: "unknown name", remove: "nothing", wantErr: inventory.ErrNotFound, named: true, kept: true},
		{name: "content has another name", setup: func(t *testing.T, f *fleet, s *Service) {
			imported(t, s, "arch", contentA)
		}, remove: "alpine", kept: true},
		{name: "content booted from", setup: func(t *testing.T, f *fleet, s *Service) {
			f.boots.set(hexSum(contentA), true)
		}, remove: "alpine", kept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s, k := newKernelFleet(t)
			a := imported(t, s, "alpine", contentA).Image.SHA256
			if err := f.store.AddImageCopy(context.Background(), inventory.ImageCopy{Server: "boot-b", SHA256: a}); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, f, s)
			}
			err := s.Remove(context.Background(), tt.remove)
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("Remove = %v, want %v", err, tt.wantErr)
			}
			_, err = f.store.GetImage(context.Background(), "alpine")
			if named := err == nil; named != tt.named {
				t.Fatalf("alpine named after Remove = %v (%v), want %v", named, err, tt.named)
			}
			if kept := f.blobs.Has(a); kept != tt.kept {
				t.Fatalf("content here after Remove = %v, want %v", kept, tt.kept)
			}
			want := []string{"boot-b"}
			if tt.kept {
				want = append(want, "self")
			}
			if got := f.holders(a); !slices.Equal(got, want) {
				t.Fatalf("holders after Remove = %v, want %v", got, want)
			}
			if k.gone(a) == tt.kept {
				t.Fatalf("kernels removed = %v, want %v", k.gone(a), !tt.kept)
			}
		})
	}
}

// TestRemoveThenCheck: content kept while a machine boots from it goes
// at the first check after the machine lets go.
func TestRemoveThenCheck(t *testing.T) {
	f := newFleet(t)
	s := f.service(time.Second)
	a := imported(t, s, "alpine", contentA).Image.SHA256
	f.boots.set(a, true)
	if err := s.Remove(context.Background(), "alpine"); err != nil {
		t.Fatal(err)
	}
	s.cfg.Grace = -1 // imported a moment ago
	s.Check(context.Background())
	if !f.blobs.Has(a) {
		t.Fatal("content deleted by a check while a machine boots from it")
	}
	f.boots.set(a, false)
	s.Check(context.Background())
	if f.blobs.Has(a) {
		t.Fatal("content kept by the check after the machine let go")
	}
}
