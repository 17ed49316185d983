package blockstore

import (
	"errors"
	"fmt"
	"os"

	"github.com/bootfleet/bootfleet/internal/imagelayer"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// Layered is an image version stored as layers over a whole image (see
// package imagelayer): a Base for overlays and a Store of its own, like
// Image. Each block reads from the topmost layer that holds it. A READ
// whose blocks all lie together in one file (the base, or one layer's
// run of changed blocks) takes that file's fast paths, mapping and
// sendfile included, so a version costs no more to serve than a whole
// image except for reads that straddle a layer's edge.
type Layered struct {
	chain *imagelayer.Chain
	srcs  []*Image // the layers top first, then the base
}

// OpenLayered opens the version made of the layer files at layers, top
// first, over the whole image at base.
func OpenLayered(base string, layers []string) (*Layered, error) {
	l := &Layered{}
	var ls []imagelayer.Layer
	for _, p := range layers {
		img, err := OpenImage(p)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.srcs = append(l.srcs, img)
		x, err := readIndex(img)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("blockstore: layer %s: %w", p, err)
		}
		ls = append(ls, imagelayer.Layer{Index: x, File: img})
	}
	b, err := OpenImage(base)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.srcs = append(l.srcs, b)
	if l.chain, err = imagelayer.NewChain(b, b.Size(), ls...); err != nil {
		l.Close()
		return nil, fmt.Errorf("blockstore: %w", err)
	}
	return l, nil
}

// readIndex reads a layer file's index and checks its length.
func readIndex(img *Image) (*imagelayer.Index, error) {
	head := make([]byte, min(img.Size(), imagelayer.HeaderSize))
	if _, err := img.ReadAt(head, 0); err != nil {
		return nil, err
	}
	h, err := imagelayer.ParseHeader(head)
	if err != nil {
		return nil, err
	}
	if img.Size() != h.FileSize() {
		return nil, fmt.Errorf("%w: file of %d bytes, want %d", imagelayer.ErrFormat, img.Size(), h.FileSize())
	}
	head = make([]byte, h.DataOffset())
	if _, err := img.ReadAt(head, 0); err != nil {
		return nil, err
	}
	return imagelayer.ParseIndex(head)
}

func (l *Layered) ReadAt(p []byte, off int64) (int, error) { return l.chain.ReadAt(p, off) }

// Size is the version's size in bytes.
func (l *Layered) Size() int64 { return l.chain.Size() }

// Depth is the number of layers over the base.
func (l *Layered) Depth() int { return l.chain.Depth() }

// SetSharers is Image.SetSharers, for every file of the version.
func (l *Layered) SetSharers(n int) {
	for _, s := range l.srcs {
		s.SetSharers(n)
	}
}

// InMemory says whether the base lives in memory.
func (l *Layered) InMemory() bool { return l.srcs[len(l.srcs)-1].InMemory() }

// Close closes every file; disks opened on the version must be closed
// first.
func (l *Layered) Close() error {
	var errs []error
	for _, s := range l.srcs {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// span is the file holding [off, off+n) whole, and where, if one does.
func (l *Layered) span(off, n int64) (*Image, int64, bool) {
	k, at, ok := l.chain.Span(off, n)
	if !ok {
		return nil, 0, false
	}
	if k < 0 {
		return l.srcs[len(l.srcs)-1], at, true
	}
	return l.srcs[k], at, true
}

func (l *Layered) mappedSpan(off, n int64) ([]byte, bool) {
	if s, at, ok := l.span(off, n); ok {
		return s.mappedSpan(at, n)
	}
	return nil, false
}

func (l *Layered) fileSpan(off, n int64) (*os.File, int64, bool) {
	if s, at, ok := l.span(off, n); ok {
		return s.fileSpan(at, n)
	}
	return nil, 0, false
}

func (l *Layered) loadable(off, n int64) bool {
	s, at, ok := l.span(off, n)
	return ok && s.loadable(at, n)
}

func (l *Layered) loadSpan(off, n int64) ([]byte, bool) {
	if s, at, ok := l.span(off, n); ok {
		return s.loadSpan(at, n)
	}
	return nil, false
}

func (l *Layered) readCached(p []byte, off int64) bool {
	s, at, ok := l.span(off, int64(len(p)))
	return ok && s.readCached(p, at)
}

// ReadNow is nbd.Store.ReadNow.
func (l *Layered) ReadNow(p []byte, off int64, files bool) (nbd.Span, bool) {
	return readNow(l, p, off, files)
}

// ReadSpan is nbd.Store.ReadSpan.
func (l *Layered) ReadSpan(p []byte, off int64) (nbd.Span, error) { return readSpan(l, p, off) }

// WriteNow is nbd.Store.WriteNow; a version takes no writes.
func (l *Layered) WriteNow([]byte, int64) bool { return false }
