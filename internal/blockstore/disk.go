package blockstore

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Mode is what happens to a machine's writes (profile key root.overlay).
type Mode int

const (
	// Ephemeral starts every open with an empty overlay: a machine boots
	// clean every time. The overlay files are removed on Close.
	Ephemeral Mode = iota
	// Persistent keeps the overlay across opens until Reset.
	Persistent
	// None serves the base read-only; writes get EPERM.
	None
)

func (m Mode) String() string {
	switch m {
	case Ephemeral:
		return "ephemeral"
	case Persistent:
		return "persistent"
	case None:
		return "none"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses the config spelling of a Mode.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Ephemeral, Persistent, None} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("blockstore: overlay mode %q: want ephemeral, persistent or none", s)
}

// Disk is what a machine's NBD export reads and writes. It satisfies
// nbd.Export and its Zeroer upgrade. Disks are safe for concurrent use.
type Disk interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Size() int64
	Flush() error
	Trim(off, n int64) error
	WriteZeroes(off, n int64, noHole bool) error
	ReadOnly() bool
	// FileSpan is nbd.FileSpanner: ok when the range reads straight from
	// the immutable base image's file.
	FileSpan(off, n int64) (f *os.File, fileOff int64, ok bool)
	// Loadable and LoadSpan are nbd.LoadingSpanner: the mapped bytes of
	// a range that reads straight from the base image, once loaded from
	// the disk.
	Loadable(off, n int64) bool
	LoadSpan(off, n int64) ([]byte, bool)
	// MappedSpan is nbd.MappedSpanner: the bytes of the range, in memory,
	// when it reads straight from the base image and the page cache holds it.
	MappedSpan(off, n int64) ([]byte, bool)
	// ReadCached is nbd.CachedReader: ReadAt when the data is in memory.
	ReadCached(p []byte, off int64) bool
	// WriteCached is nbd.CachedWriter: WriteAt when it need not wait.
	WriteCached(p []byte, off int64) bool
}

// Open returns the Disk for mode: base itself, read-only, for None; an
// Overlay in dir otherwise. Closing the Disk does not close base.
func Open(base Image, dir string, mode Mode, opts Options) (Disk, error) {
	switch mode {
	case None:
		return readOnly{base}, nil
	case Ephemeral, Persistent:
		return OpenOverlay(base, dir, mode, opts)
	}
	return nil, fmt.Errorf("blockstore: unknown overlay mode %v", mode)
}

// readOnly serves an Image as a Disk that refuses writes.
type readOnly struct{ Image }

func errReadOnly(op string) error {
	return fmt.Errorf("blockstore: %s on a read-only disk (overlay mode none): %w", op, syscall.EPERM)
}

func (readOnly) WriteAt([]byte, int64) (int, error)   { return 0, errReadOnly("write") }
func (readOnly) Trim(int64, int64) error              { return errReadOnly("trim") }
func (readOnly) WriteZeroes(int64, int64, bool) error { return errReadOnly("write zeroes") }
func (readOnly) Flush() error                         { return nil }
func (readOnly) ReadOnly() bool                       { return true }
func (readOnly) Close() error                         { return nil }
func (readOnly) WriteCached([]byte, int64) bool       { return false }

// mappedSpanner is the nbd.MappedSpanner upgrade, which File has.
type mappedSpanner interface {
	MappedSpan(off, n int64) ([]byte, bool)
}

func (r readOnly) MappedSpan(off, n int64) ([]byte, bool) {
	if ms, ok := r.Image.(mappedSpanner); ok {
		return ms.MappedSpan(off, n)
	}
	return nil, false
}

// loadingSpanner is the nbd.LoadingSpanner upgrade, which File has.
type loadingSpanner interface {
	Loadable(off, n int64) bool
	LoadSpan(off, n int64) ([]byte, bool)
}

func (r readOnly) Loadable(off, n int64) bool {
	ls, ok := r.Image.(loadingSpanner)
	return ok && ls.Loadable(off, n)
}

func (r readOnly) LoadSpan(off, n int64) ([]byte, bool) {
	if ls, ok := r.Image.(loadingSpanner); ok {
		return ls.LoadSpan(off, n)
	}
	return nil, false
}

func (r readOnly) FileSpan(off, n int64) (*os.File, int64, bool) {
	if fs, ok := r.Image.(fileSpanner); ok {
		return fs.FileSpan(off, n)
	}
	return nil, 0, false
}
