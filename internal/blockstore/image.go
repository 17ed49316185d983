package blockstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Base is a read-only source of bytes with a known size: a base image, or
// later a shared read cache in front of one.
type Base interface {
	io.ReaderAt
	Size() int64
}

// Image is a base image file, opened read-only by OpenImage: the Base
// overlays are built on, and a Store of its own for mode none. It is safe
// for concurrent use; every reader shares the kernel page cache of the one
// file.
type Image struct {
	f    *os.File
	size int64
	res  residency
	m    []byte // the file mapped read-only for mappedSpan and loadSpan
	// streams loads sequential ranges for loadSpan in order.
	streams *streams
	// sharers is how many machines read the image at once (SetSharers).
	sharers atomic.Int32
}

// SetSharers tells the image how many machines read it now: on a disk,
// READs are answered from the mapping at once only for an image that two
// or more share.
func (b *Image) SetSharers(n int) { b.sharers.Store(int32(min(n, 1<<30))) }

// InMemory says whether the image lives in memory (tmpfs, ramfs), where
// its pages stay whether or not anything maps them.
func (b *Image) InMemory() bool { return b.res == inMemory }

// OpenImage opens the base image at path read-only. Images are immutable:
// replacing the file under running clients would corrupt their overlays,
// so import new versions under a new path.
func OpenImage(path string) (*Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("blockstore: open base image: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("blockstore: stat base image: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("blockstore: base image %s is a %v, want a regular file", path, st.Mode().Type())
	}
	b := &Image{f: f, size: st.Size(), res: probeResidency(f)}
	b.m = mapImage(f, b.size)
	b.streams = newStreams(f, b.size)
	return b, nil
}

func (b *Image) ReadAt(p []byte, off int64) (int, error) { return b.f.ReadAt(p, off) }

// fileSpan says that [off, off+n) of the image is the same range of its
// file, which never changes, so it may go out with sendfile. Only a file
// in memory offers spans: on a disk, sendfile of the spans the page cache
// held cut gaps into the sequential reads of the workers, and readahead
// took them for random access.
func (b *Image) fileSpan(off, n int64) (*os.File, int64, bool) {
	if b.res != inMemory || off < 0 || n < 0 || off > b.size || n > b.size-off {
		return nil, 0, false
	}
	return b.f, off, true
}

// loadable says whether loadSpan serves [off, off+n): the image is mapped
// and holds the range. It does not wait.
func (b *Image) loadable(off, n int64) bool {
	return b.m != nil && off >= 0 && n > 0 && off <= b.size && n <= b.size-off
}

// Size is the image size in bytes.
func (b *Image) Size() int64 { return b.size }

// Close closes the file. Disks opened on it must be closed first, and
// nothing may use a Span it returned after Close.
func (b *Image) Close() error {
	b.streams.close()
	return errors.Join(unmap(b.m), b.f.Close())
}
