package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
