package tftp

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bootfleet/bootfleet/internal/safefs"
)

// FileSystem is where the server gets files. Open receives the file name
// exactly as the client sent it; the implementation must refuse names that
// leave its roots. Errors matching fs.ErrNotExist become TFTP error 1 (file
// not found), errors matching fs.ErrPermission become error 2 (access
// violation), anything else error 0.
type FileSystem interface {
	Open(name string) (File, error)
}

// File is an open file. Size must be exact and known up front: it answers
// the tsize option, which firmware uses to allocate memory, and tells the
// sender where the last block ends. A source that cannot know its size
// cannot be served.
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// ModTimer is implemented by files that know their modification time. The
// cache keys entries by name, size and modification time and only caches
// files that implement it.
type ModTimer interface {
	ModTime() time.Time
}

// RootsFS serves files from r, with its path rules (see package safefs).
func RootsFS(r *safefs.Roots) FileSystem {
	return rootsFS{r}
}

type rootsFS struct{ r *safefs.Roots }

func (fsys rootsFS) Open(name string) (File, error) {
	f, err := fsys.r.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return &osFile{File: f, size: fi.Size(), mtime: fi.ModTime()}, nil
}

type osFile struct {
	*os.File
	size  int64
	mtime time.Time
}

func (f *osFile) Size() int64        { return f.size }
func (f *osFile) ModTime() time.Time { return f.mtime }
