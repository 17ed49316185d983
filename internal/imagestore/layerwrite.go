package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/bootfleet/bootfleet/internal/durable"
	"github.com/bootfleet/bootfleet/internal/imagelayer"
)

// ImportOver is ImportContext for a new version of content parent: when
// the upload is new content of the parent's size, it is stored as a
// layer of the blocks that differ, unless half of them or more do (then
// it is stored whole, as it costs no more and reads faster). Imported
// says which in Parent.
func (s *Store) ImportOver(ctx context.Context, r io.Reader, parent string) (Imported, error) {
	path, sum, res, err := s.stage(ctx, r)
	if err != nil {
		return res, err
	}
	if sum == parent || s.Has(sum) || !s.Has(parent) {
		st, err := s.commit(path, sum)
		if err != nil {
			return res, err
		}
		res.SHA256, res.Size, res.Allocated = sum, st.Size(), allocated(st)
		return res, nil
	}
	return s.layerOver(ctx, path, sum, parent, res)
}

// layerOver stores the whole content at path (sha256 sum) as a layer over
// parent, or whole when that saves little; path is removed either way.
func (s *Store) layerOver(ctx context.Context, path, sum, parent string, res Imported) (Imported, error) {
	whole := func() (Imported, error) {
		st, err := s.commit(path, sum)
		if err != nil {
			return res, err
		}
		res.SHA256, res.Size, res.Allocated = sum, st.Size(), allocated(st)
		return res, nil
	}
	pr, err := s.OpenReader(parent)
	if err != nil {
		os.Remove(path)
		return res, err
	}
	defer pr.Close()
	f, err := os.Open(path)
	if err != nil {
		os.Remove(path)
		return res, fmt.Errorf("imagestore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != pr.Size() {
		return whole()
	}
	x, err := imagelayer.Diff(ctx, f, pr, st.Size(), parent, imagelayer.DefaultBlockShift)
	if err != nil {
		os.Remove(path)
		return res, fmt.Errorf("imagestore: compare with the parent: %w", err)
	}
	if x.Count*2 >= x.Blocks() {
		return whole()
	}
	lst, err := s.putLayer(ctx, x, f, sum)
	os.Remove(path)
	if err != nil {
		return res, err
	}
	res.SHA256, res.Size, res.Allocated, res.Parent = sum, st.Size(), allocated(lst), parent
	return res, nil
}

// putLayer writes the layer x of content (sha256 sum) and stores it, once
// durable, under its hash.
func (s *Store) putLayer(ctx context.Context, x *imagelayer.Index, content io.ReaderAt, sum string) (os.FileInfo, error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return nil, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	sw := newSparseWriter(tmp)
	err = imagelayer.Write(ctx, sw, x, content)
	if err == nil {
		err = sw.Close()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o440)
	}
	dst := filepath.Join(s.layerDir(), sum)
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err == nil {
		err = durable.SyncDir(s.layerDir())
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("imagestore: store layer: %w", err)
	}
	return os.Stat(dst)
}

// StoreLayer stores content (size bytes: a maintenance version's disk)
// as a layer over content parent, hashing it on the way: one sequential
// read of both to compare, one more of the blocks that differ. Content
// already stored (nothing changed, say) is not stored again.
func (s *Store) StoreLayer(ctx context.Context, content io.ReaderAt, size int64, parent string) (Imported, error) {
	pr, err := s.OpenReader(parent)
	if err != nil {
		return Imported{}, err
	}
	defer pr.Close()
	if pr.Size() != size {
		return Imported{}, fmt.Errorf("imagestore: a layer of %d bytes over content %.12s of %d bytes", size, parent, pr.Size())
	}
	h := &hashingReader{r: content, h: sha256.New()}
	x, err := imagelayer.Diff(ctx, h, pr, size, parent, imagelayer.DefaultBlockShift)
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: compare with the parent: %w", err)
	}
	if h.next != size {
		return Imported{}, fmt.Errorf("imagestore: hashed %d bytes of %d", h.next, size)
	}
	sum := hex.EncodeToString(h.h.Sum(nil))
	res := Imported{SHA256: sum, Size: size, Format: Raw, Parent: parent}
	if s.Has(sum) {
		res.Parent = s.Parent(sum)
		return res, nil
	}
	st, err := s.putLayer(ctx, x, content, sum)
	if err != nil {
		return res, err
	}
	res.Allocated = allocated(st)
	return res, nil
}

// hashingReader hashes what is read from r, which must be read in order
// from the start, as Diff does.
type hashingReader struct {
	r    io.ReaderAt
	h    hash.Hash
	next int64
}

func (r *hashingReader) ReadAt(p []byte, off int64) (int, error) {
	if off != r.next {
		return 0, fmt.Errorf("imagestore: hashing read at %d, want %d", off, r.next)
	}
	n, err := r.r.ReadAt(p, off)
	r.h.Write(p[:n])
	r.next += int64(n)
	return n, err
}
