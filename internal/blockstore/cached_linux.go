package blockstore

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// probeResidency finds out how f can be read without waiting for storage.
func probeResidency(f *os.File) residency {
	var st unix.Statfs_t
	if err := fstatfs(f, &st); err == nil && (st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC) {
		return inMemory
	}
	var b [1]byte
	var err error
	cerr := control(f, func(fd int) { _, err = unix.Preadv2(fd, [][]byte{b[:]}, 0, unix.RWF_NOWAIT) })
	if cerr != nil || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return mayWait
	}
	return noWait
}

// readCached fills p from f at off if it can without waiting for storage.
func readCached(f *os.File, r residency, p []byte, off int64) bool {
	switch r {
	case inMemory:
		n, _ := f.ReadAt(p, off)
		return n == len(p)
	case noWait:
		n := -1
		if control(f, func(fd int) { n, _ = unix.Preadv2(fd, [][]byte{p}, off, unix.RWF_NOWAIT) }) != nil {
			return false
		}
		return n == len(p)
	}
	return false
}

// writeCached writes p to f at off if it can without waiting for storage;
// nowaitWrites is cleared when the file system turns out not to support
// RWF_NOWAIT writes, so later calls do not ask again.
func writeCached(f *os.File, r residency, nowaitWrites *atomic.Bool, p []byte, off int64) bool {
	switch r {
	case inMemory:
		n, _ := f.WriteAt(p, off)
		return n == len(p)
	case noWait:
		if !nowaitWrites.Load() {
			return false
		}
		n := -1
		var err error
		if control(f, func(fd int) { n, err = unix.Pwritev2(fd, [][]byte{p}, off, unix.RWF_NOWAIT) }) != nil {
			return false
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			nowaitWrites.Store(false)
		}
		return n == len(p)
	}
	return false
}

func fstatfs(f *os.File, st *unix.Statfs_t) error {
	var err error
	if cerr := control(f, func(fd int) { err = unix.Fstatfs(fd, st) }); cerr != nil {
		return cerr
	}
	return err
}

func control(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}
