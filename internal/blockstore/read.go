package blockstore

import (
	"io"
	"os"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// sources are the ways an image or disk can hand out the bytes of a READ
// besides ReadAt. Image has them all; Overlay and mode none take them from
// their base, for ranges that read from it.
type sources interface {
	io.ReaderAt
	// mappedSpan is the range in a mapping of the image, ok only when
	// reading it will not wait for storage.
	mappedSpan(off, n int64) ([]byte, bool)
	// fileSpan is the range as a span of the image's file, for sendfile.
	fileSpan(off, n int64) (*os.File, int64, bool)
	// loadable says, without waiting, whether loadSpan serves the range.
	loadable(off, n int64) bool
	// loadSpan is mappedSpan once storage has brought the range in.
	loadSpan(off, n int64) ([]byte, bool)
	// readCached fills p from off if it can without waiting for storage.
	readCached(p []byte, off int64) bool
}

// minSpan is the smallest READ answered with a span of the store's own
// (mapped, loaded, or a file span). Below it, a pread into the server's
// buffer costs less than the extra system call: buffered replies of one
// batch leave in one sendmsg, while each file span needs its own sendfile.
const minSpan = 64 << 10

// readNow is the choice behind every Store.ReadNow. A large READ comes
// from the mapping first, whose one copy hands the client bytes in the
// CPU cache, then as a file span; one the mapping can load goes to a
// worker (ReadSpan), to keep the disk reads of a sequential reader in
// order. Anything else is copied into p if it is in memory.
func readNow(s sources, p []byte, off int64, files bool) (nbd.Span, bool) {
	if n := int64(len(p)); n >= minSpan {
		if b, ok := s.mappedSpan(off, n); ok {
			return nbd.Span{Bytes: b}, true
		}
		if files {
			if f, foff, ok := s.fileSpan(off, n); ok {
				return nbd.Span{File: f, FileOff: foff}, true
			}
		}
		if s.loadable(off, n) {
			return nbd.Span{}, false
		}
	}
	if s.readCached(p, off) {
		return nbd.Span{Bytes: p}, true
	}
	return nbd.Span{}, false
}

// readSpan is the choice behind every Store.ReadSpan: the mapping once
// loaded, else ReadAt into p, which also reports a read error.
func readSpan(s sources, p []byte, off int64) (nbd.Span, error) {
	if n := int64(len(p)); n >= minSpan && s.loadable(off, n) {
		if b, ok := s.loadSpan(off, n); ok {
			return nbd.Span{Bytes: b}, nil
		}
	}
	if err := nbd.ReadFull(s, p, off); err != nil {
		return nbd.Span{}, err
	}
	return nbd.Span{Bytes: p}, nil
}

// ReadNow is nbd.Store.ReadNow.
func (b *Image) ReadNow(p []byte, off int64, files bool) (nbd.Span, bool) {
	return readNow(b, p, off, files)
}

// ReadSpan is nbd.Store.ReadSpan.
func (b *Image) ReadSpan(p []byte, off int64) (nbd.Span, error) { return readSpan(b, p, off) }

// WriteNow is nbd.Store.WriteNow; an image takes no writes.
func (b *Image) WriteNow([]byte, int64) bool { return false }

// ReadNow is nbd.Store.ReadNow.
func (o *Overlay) ReadNow(p []byte, off int64, files bool) (nbd.Span, bool) {
	return readNow(o, p, off, files)
}

// ReadSpan is nbd.Store.ReadSpan.
func (o *Overlay) ReadSpan(p []byte, off int64) (nbd.Span, error) { return readSpan(o, p, off) }

// ReadNow is nbd.Store.ReadNow.
func (r readOnly) ReadNow(p []byte, off int64, files bool) (nbd.Span, bool) {
	return readNow(r, p, off, files)
}

// ReadSpan is nbd.Store.ReadSpan.
func (r readOnly) ReadSpan(p []byte, off int64) (nbd.Span, error) { return readSpan(r, p, off) }
