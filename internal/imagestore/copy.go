package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// ErrMismatch means content copied from elsewhere (a peer server) is not
// what its name promised: another hash or another size. The copy is
// dropped; the store is unchanged.
var ErrMismatch = errors.New("imagestore: copied content does not match")

// PutCopy stores raw content that another store already holds under the
// hex sha256 want, size bytes long: r is copied as it is (no format
// detection, no conversion: it was converted where it was imported), left
// sparse, hashed on the way, and appears under want only when the hash and
// size match, after an fsync. A mismatch wraps ErrMismatch and says what
// arrived. Cancelling ctx stops the copy. Content already stored is not
// copied again.
func (s *Store) PutCopy(ctx context.Context, r io.Reader, want string, size int64) (Imported, error) {
	if _, err := s.Path(want); err != nil {
		return Imported{}, err
	}
	f, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	path := f.Name()
	h := sha256.New()
	sw := newSparseWriter(f)
	n, err := copyCtx(ctx, io.MultiWriter(sw, h), r)
	if err == nil {
		err = sw.Close()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("imagestore: close image: %w", cerr)
	}
	res := Imported{Received: n, Format: Raw}
	if err != nil {
		os.Remove(path)
		return res, err
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want || n != size {
		os.Remove(path)
		return res, fmt.Errorf("%w: got %d bytes hashing to sha256 %s, want %d bytes of %s", ErrMismatch, n, got, size, want)
	}
	st, err := s.commit(path, want)
	if err != nil {
		return res, err
	}
	res.SHA256, res.Size, res.Allocated = want, st.Size(), allocated(st)
	return res, nil
}

// List returns the hex sha256 of every content stored, whole or as a
// layer, sorted.
func (s *Store) List() ([]string, error) {
	var out []string
	for _, dir := range []string{s.blobDir(), s.layerDir()} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("imagestore: %w", err)
		}
		for _, e := range ents {
			if hexRE.MatchString(e.Name()) && e.Type().IsRegular() {
				out = append(out, e.Name())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// OpenContent opens the content with sha256 hex for reading, or its layer
// when it is stored as one (Parent says over what), for a peer to copy.
// The file stays readable while open even if the content is removed
// meanwhile.
func (s *Store) OpenContent(hex string) (*os.File, error) {
	p, err := s.Path(hex)
	if err != nil {
		return nil, err
	}
	if lp, ok := s.layerPath(hex); ok {
		p = lp
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	return f, nil
}
