package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/bootfleet/bootfleet/internal/durable"
	"github.com/bootfleet/bootfleet/internal/imagelayer"
)

// A content made from another (a rebuilt image imported under the same
// name, a version edited by a machine) is stored as a layer: only the
// blocks that differ from its parent, in DATA/images/layers/<sha256>, in
// the form package imagelayer defines. Its sha256 is still that of the
// content as served, all layers read through.

// MaxDepth bounds a chain of layers. Reads cost one bitmap test per layer
// a block is not in, so a deep chain is slower; merging keeps chains
// short, and a corrupt store cannot loop.
const MaxDepth = 32

func (s *Store) layerDir() string { return filepath.Join(s.dir, "layers") }

// layerPath is where content sha is stored as a layer, if it is.
func (s *Store) layerPath(sha string) (string, bool) {
	if !hexRE.MatchString(sha) {
		return "", false
	}
	p := filepath.Join(s.layerDir(), sha)
	st, err := os.Stat(p)
	return p, err == nil && st.Mode().IsRegular()
}

// Chain is stored content as files: its layers, top first, over a whole
// content at the bottom. A content stored whole has no layers.
type Chain struct {
	Layers  []string // paths of the layer files, top first
	Base    string   // path of the whole content at the bottom
	BaseSHA string
}

// Chain finds the files content sha reads from. It fails wrapping
// os.ErrNotExist when sha or a parent is missing.
func (s *Store) Chain(sha string) (Chain, error) {
	var c Chain
	for range MaxDepth + 1 {
		if p, err := s.Path(sha); err != nil {
			return c, err
		} else if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			c.Base, c.BaseSHA = p, sha
			return c, nil
		}
		lp, ok := s.layerPath(sha)
		if !ok {
			return c, fmt.Errorf("imagestore: content %.12s is not stored: %w", sha, os.ErrNotExist)
		}
		h, err := readLayerHeader(lp)
		if err != nil {
			return c, err
		}
		c.Layers = append(c.Layers, lp)
		sha = h.Parent
	}
	return c, fmt.Errorf("imagestore: content %.12s is more than %d layers deep; merge the image", sha, MaxDepth)
}

// Parent is the content a layer is stored over; "" for content stored
// whole or not stored.
func (s *Store) Parent(sha string) string {
	lp, ok := s.layerPath(sha)
	if !ok {
		return ""
	}
	h, err := readLayerHeader(lp)
	if err != nil {
		return ""
	}
	return h.Parent
}

func readLayerHeader(path string) (imagelayer.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return imagelayer.Header{}, fmt.Errorf("imagestore: %w", err)
	}
	defer f.Close()
	b := make([]byte, imagelayer.HeaderSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return imagelayer.Header{}, fmt.Errorf("imagestore: layer %s: %w: %w", path, imagelayer.ErrFormat, err)
	}
	h, err := imagelayer.ParseHeader(b)
	if err != nil {
		return h, fmt.Errorf("imagestore: layer %s: %w", path, err)
	}
	return h, nil
}

// OpenLayer opens the layer file at path and reads its index.
func OpenLayer(path string) (*os.File, *imagelayer.Index, error) {
	h, err := readLayerHeader(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("imagestore: %w", err)
	}
	head := make([]byte, h.DataOffset())
	if _, err := f.ReadAt(head, 0); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("imagestore: layer %s: %w: %w", path, imagelayer.ErrFormat, err)
	}
	x, err := imagelayer.ParseIndex(head)
	if err == nil {
		if st, serr := f.Stat(); serr != nil || st.Size() != x.FileSize() {
			err = fmt.Errorf("imagestore: layer %s is cut short: want %d bytes: %w", path, x.FileSize(), imagelayer.ErrFormat)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, x, nil
}

// Reader is stored content read as served.
type Reader interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// OpenReader opens content sha as served, through its layers if it has
// any: for hashing, kernels and merges, not for serving machines (package
// blockstore serves with its fast paths).
func (s *Store) OpenReader(sha string) (Reader, error) {
	c, err := s.Chain(sha)
	if err != nil {
		return nil, err
	}
	base, err := os.Open(c.Base)
	if err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	st, err := base.Stat()
	if err != nil {
		base.Close()
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	r := &chainReader{files: []*os.File{base}, size: st.Size(), ReaderAt: base}
	if len(c.Layers) == 0 {
		return r, nil
	}
	var layers []imagelayer.Layer
	for _, p := range c.Layers {
		f, x, err := OpenLayer(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.files = append(r.files, f)
		layers = append(layers, imagelayer.Layer{Index: x, File: f})
	}
	ch, err := imagelayer.NewChain(base, st.Size(), layers...)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("imagestore: content %.12s: %w", sha, err)
	}
	r.ReaderAt = ch
	return r, nil
}

type chainReader struct {
	io.ReaderAt
	files []*os.File
	size  int64
}

func (r *chainReader) Size() int64 { return r.size }

func (r *chainReader) Close() error {
	var errs []error
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

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

// Flat returns a whole file of content sha, for tools that need one (a
// loop mount to build kernels): the stored file, or for a version stored
// as layers a sparse temporary copy read through them. Call done when
// finished with the file; it removes the copy.
func (s *Store) Flat(ctx context.Context, sha string) (path string, done func(), err error) {
	c, err := s.Chain(sha)
	if err != nil {
		return "", nil, err
	}
	if len(c.Layers) == 0 {
		return c.Base, func() {}, nil
	}
	r, err := s.OpenReader(sha)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	f, err := os.CreateTemp(s.tmpDir(), "flat-*")
	if err != nil {
		return "", nil, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	sw := newSparseWriter(f)
	_, err = copyCtx(ctx, sw, io.NewSectionReader(r, 0, r.Size()))
	if err == nil {
		err = sw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, fmt.Errorf("imagestore: flatten content %.12s: %w", sha, err)
	}
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

// PutLayerCopy stores the layer r holds, copied from a peer, as content
// want (size bytes as served) over content parent, which must be here.
// The layer appears only once the content read through it and the parent
// hashes to want; a mismatch wraps ErrMismatch and a malformed layer
// imagelayer.ErrFormat. Content already stored is not copied again.
func (s *Store) PutLayerCopy(ctx context.Context, r io.Reader, want, parent string, size int64) (Imported, error) {
	if _, err := s.Path(want); err != nil {
		return Imported{}, err
	}
	if s.Has(want) {
		return Imported{SHA256: want, Size: size, Parent: s.Parent(want)}, nil
	}
	pr, err := s.OpenReader(parent)
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: layer %.12s needs its parent %.12s here first: %w", want, parent, err)
	}
	defer pr.Close()
	tmp, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	path := tmp.Name()
	n, err := copyCtx(ctx, tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	res := Imported{Received: n, Format: Raw}
	if err == nil {
		err = s.checkLayer(ctx, path, want, parent, size, pr)
	}
	if err != nil {
		os.Remove(path)
		return res, err
	}
	if err = os.Chmod(path, 0o440); err == nil {
		err = syncFile(path)
	}
	dst := filepath.Join(s.layerDir(), want)
	if err == nil {
		err = os.Rename(path, dst)
	}
	if err == nil {
		err = durable.SyncDir(s.layerDir())
	}
	if err != nil {
		os.Remove(path)
		return res, fmt.Errorf("imagestore: store layer: %w", err)
	}
	st, err := os.Stat(dst)
	if err != nil {
		return res, fmt.Errorf("imagestore: %w", err)
	}
	res.SHA256, res.Size, res.Allocated, res.Parent = want, size, allocated(st), parent
	return res, nil
}

// checkLayer checks that the layer file at path is a layer over parent
// (read through pr) whose content is size bytes hashing to want.
func (s *Store) checkLayer(ctx context.Context, path, want, parent string, size int64, pr Reader) error {
	f, x, err := OpenLayer(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if x.Parent != parent || x.Size != size || pr.Size() != size {
		return fmt.Errorf("%w: got a layer of %d bytes over %.12s, want %d bytes over %.12s (%d bytes here)",
			ErrMismatch, x.Size, x.Parent, size, parent, pr.Size())
	}
	c, err := imagelayer.NewChain(pr, size, imagelayer.Layer{Index: x, File: f})
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := copyCtx(ctx, h, io.NewSectionReader(c, 0, size)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: the layer reads as content hashing to sha256 %s, want %s", ErrMismatch, got, want)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
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
