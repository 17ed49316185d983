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

// adviseRandom tells the kernel that f is read at random, so its reads
// bring in only the pages asked for: readahead fills the page cache with
// large folios, and on ext4 (Linux 6.16 and later) every small write into
// one walks all of the folio's buffer heads.
func adviseRandom(f *os.File) {
	_ = control(f, func(fd int) { _ = unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM) })
}

// readFileCached fills p from f at off if it can without waiting for
// storage.
func readFileCached(f *os.File, r residency, p []byte, off int64) bool {
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

// writeFileCached writes p to f at off if it can without waiting for
// storage; nowaitWrites is cleared when the file system turns out not to
// support RWF_NOWAIT writes, so later calls do not ask again.
//
// Such a file system (ext4, where persistent overlays usually live) still
// takes whole pages into the page cache without reading the disk, waiting
// only as every writer of the page cache does, which is back-pressure the
// client should feel. A write of part of a page may need the page from
// the disk first, so it goes to a worker.
func writeFileCached(f *os.File, r residency, nowaitWrites *atomic.Bool, p []byte, off int64) bool {
	switch r {
	case inMemory:
		n, _ := f.WriteAt(p, off)
		return n == len(p)
	case noWait:
		if !nowaitWrites.Load() {
			if !wholePages(off, len(p)) {
				return false
			}
			n, _ := f.WriteAt(p, off)
			return n == len(p)
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

// wholePages says whether [off, off+n) starts and ends on page boundaries.
func wholePages(off int64, n int) bool {
	page := int64(os.Getpagesize())
	return n > 0 && off%page == 0 && int64(n)%page == 0
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

// mapImage maps a base image read-only for mappedSpan and loadSpan, or
// returns nil: a failed mapping only costs those spans (sendfile or ReadAt
// then serves the reads).
func mapImage(f *os.File, size int64) []byte {
	if size <= 0 || size != int64(int(size)) {
		return nil
	}
	var m []byte
	var err error
	if control(f, func(fd int) { m, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED) }) != nil || err != nil {
		return nil
	}
	return m
}

// loadSpan returns [off, off+n) of the image's mapping once the page cache
// holds it, waiting for the disk if it must (a worker calls it, through
// ReadSpan). The pages come in through the image's streams, so a client's
// sequential reads reach the disk as one, and are then mapped
// (MADV_POPULATE_READ) so that the copy into the socket, the only one,
// takes no page fault; the client then receives bytes that copy has just
// brought into the CPU cache. False (no mapping, or a read error) leaves
// the READ to ReadAt.
func (b *Image) loadSpan(off, n int64) ([]byte, bool) {
	if !b.loadable(off, n) {
		return nil, false
	}
	if !b.streams.load(off, n) {
		return nil, false
	}
	page := int64(os.Getpagesize())
	start, end := off&^(page-1), min((off+n+page-1)&^(page-1), int64(len(b.m)))
	// Before Linux 5.14 (EINVAL) the send faults the pages in instead. Any
	// other error is a page the disk could not give again (evicted since
	// the load): ReadAt then reports it to the client.
	if err := unix.Madvise(b.m[start:end], unix.MADV_POPULATE_READ); err != nil && err != unix.EINVAL {
		return nil, false
	}
	return b.m[off : off+n : off+n], true
}

func unmap(m []byte) error {
	if m == nil {
		return nil
	}
	return unix.Munmap(m)
}

// mappedSpan returns [off, off+n) of the image, a slice of its read-only
// mapping, when every page of it is in the page cache (cachestat(2)), so
// reading the slice does not wait for the disk (or for swap, on tmpfs).
// It copies once, from the page cache to the socket, and hands the client
// bytes in the CPU cache, which counts when it shares the server's CPUs.
//
// On a disk it says no while fewer than two machines read the image
// (SetSharers): a lone reader's cached pages are the ones its own
// readahead just brought in, and answering them on the request loop as
// they came stopped the workers reading ahead of it. An image in memory
// has no readahead to disturb.
func (b *Image) mappedSpan(off, n int64) ([]byte, bool) {
	if b.m == nil || (b.res != inMemory && b.sharers.Load() < 2) || off < 0 || n <= 0 || off > b.size || n > b.size-off {
		return nil, false
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	r := unix.CachestatRange{Off: uint64(start), Len: uint64(off + n - start)}
	var st unix.Cachestat_t
	var err error
	if control(b.f, func(fd int) { err = unix.Cachestat(uint(fd), &r, &st, 0) }) != nil || err != nil {
		return nil, false
	}
	if int64(st.Cache) < (int64(r.Len)+page-1)/page {
		return nil, false
	}
	return b.m[off : off+n : off+n], true
}
