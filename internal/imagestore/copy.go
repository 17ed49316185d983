package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
//
// r starts at byte from of the content: 0, or Partial(want) to resume a
// copy that stopped early. A copy that stops early (a broken connection,
// a cancelled ctx, a short r) keeps the bytes it received for the next
// one to resume and wraps io.ErrUnexpectedEOF when r ended short. The
// kept bytes are only ever a prefix of what arrived, and the whole is
// hashed before it is stored, so a resumed copy is verified as a fresh
// one is. Callers run one copy of a content at a time: they share its
// partial file.
func (s *Store) PutCopy(ctx context.Context, r io.Reader, from int64, want string, size int64) (Imported, error) {
	if _, err := s.Path(want); err != nil {
		return Imported{}, err
	}
	path := s.partialPath(want)
	if kept := s.Partial(want); from != 0 && from != kept {
		return Imported{}, fmt.Errorf("imagestore: resume of %.12s at byte %d, but %d bytes are kept; resume at %d or start at 0", want, from, kept, kept)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: open the partial copy: %w", err)
	}
	h := sha256.New()
	if from == 0 {
		err = f.Truncate(0)
	} else {
		err = hashInto(ctx, h, f, from)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return Imported{}, fmt.Errorf("imagestore: resume the partial copy of %.12s: %w", want, err)
	}
	sw := newSparseWriter(f)
	sw.off = from
	// One byte past size, so content longer than promised is caught.
	n, err := copyCtx(ctx, io.MultiWriter(sw, h), io.LimitReader(r, size-from+1))
	if cerr := sw.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("imagestore: write image: %w", cerr)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("imagestore: close image: %w", cerr)
	}
	res := Imported{Received: n, Format: Raw}
	total := from + n
	switch {
	case err != nil && total > 0 && total <= size:
		return res, err // kept for the next copy
	case err != nil:
		os.Remove(path)
		return res, err
	case total < size:
		return res, fmt.Errorf("imagestore: copy of %.12s stopped at byte %d of %d: %w; the next copy resumes there", want, total, size, io.ErrUnexpectedEOF)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want || total != size {
		os.Remove(path)
		return res, fmt.Errorf("%w: got %d bytes hashing to sha256 %s, want %d bytes of %s", ErrMismatch, total, got, size, want)
	}
	st, err := s.commit(path, want)
	if err != nil {
		return res, err
	}
	res.SHA256, res.Size, res.Allocated = want, st.Size(), allocated(st)
	return res, nil
}

// partialPath is where a copy of content want that stopped early is kept.
func (s *Store) partialPath(want string) string {
	return filepath.Join(s.tmpDir(), "partial-"+want)
}

// Partial is how many bytes of content want an earlier PutCopy kept when
// it stopped early: where the next copy resumes. 0 when none are kept.
func (s *Store) Partial(want string) int64 {
	if !hexRE.MatchString(want) {
		return 0
	}
	st, err := os.Stat(s.partialPath(want))
	if err != nil {
		return 0
	}
	return st.Size()
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
