package blockstore

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/bootfleet/bootfleet/internal/nbd"
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

// Disk is what a machine's NBD export reads and writes: an nbd.Export
// whose Store (read.go) answers READs and in-memory WRITEs, readable with
// ReadAt too. Disks are safe for concurrent use.
type Disk interface {
	nbd.Export
	io.ReaderAt
	Size() int64
	ReadOnly() bool
}

// Info is nbd.Export.Info: an Overlay's size, writable.
func (o *Overlay) Info() nbd.ExportInfo { return nbd.ExportInfo{Size: o.size} }

// Open returns the Disk for mode: base itself, read-only, for None; an
// Overlay in dir otherwise. Closing the Disk does not close base.
func Open(base Base, dir string, mode Mode, opts Options) (Disk, error) {
	switch mode {
	case None:
		return readOnly{base}, nil
	case Ephemeral, Persistent:
		return OpenOverlay(base, dir, mode, opts)
	}
	return nil, fmt.Errorf("blockstore: unknown overlay mode %v", mode)
}

// readOnly serves a Base as a Disk that refuses writes.
type readOnly struct{ Base }

func errReadOnly(op string) error {
	return fmt.Errorf("blockstore: %s on a read-only disk (overlay mode none): %w", op, syscall.EPERM)
}

func (readOnly) WriteAt([]byte, int64) (int, error)   { return 0, errReadOnly("write") }
func (readOnly) Trim(int64, int64) error              { return errReadOnly("trim") }
func (readOnly) WriteZeroes(int64, int64, bool) error { return errReadOnly("write zeroes") }
func (readOnly) Flush() error                         { return nil }
func (readOnly) ReadOnly() bool                       { return true }
func (r readOnly) Info() nbd.ExportInfo               { return nbd.ExportInfo{Size: r.Size(), ReadOnly: true} }
func (readOnly) Close() error                         { return nil }
func (readOnly) WriteNow([]byte, int64) bool          { return false }

// The sources of mode none are its image's, when it has them.

func (r readOnly) mappedSpan(off, n int64) ([]byte, bool) {
	if s, ok := r.Base.(sources); ok {
		return s.mappedSpan(off, n)
	}
	return nil, false
}

func (r readOnly) fileSpan(off, n int64) (*os.File, int64, bool) {
	if s, ok := r.Base.(sources); ok {
		return s.fileSpan(off, n)
	}
	return nil, 0, false
}

func (r readOnly) loadable(off, n int64) bool {
	s, ok := r.Base.(sources)
	return ok && s.loadable(off, n)
}

func (r readOnly) loadSpan(off, n int64) ([]byte, bool) {
	if s, ok := r.Base.(sources); ok {
		return s.loadSpan(off, n)
	}
	return nil, false
}

func (r readOnly) readCached(p []byte, off int64) bool {
	s, ok := r.Base.(sources)
	return ok && s.readCached(p, off)
}
