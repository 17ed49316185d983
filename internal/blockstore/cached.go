package blockstore

import (
	"errors"
	"os"
)

// residency is how a file's bytes can be had without waiting for storage,
// which lets the NBD server answer a READ on its request loop instead of
// handing it to a worker goroutine (nbd.Store.ReadNow).
type residency uint8

const (
	mayWait  residency = iota // no way to tell: always use ReadAt
	noWait                    // preadv2(RWF_NOWAIT) says when data is not in the page cache
	inMemory                  // tmpfs or ramfs: every read is a memory copy
)

// readCached fills p from off and returns true when the data is in memory;
// false means it read nothing useful and ReadAt must be used.
func (b *Image) readCached(p []byte, off int64) bool {
	if off < 0 || int64(len(p)) > b.size-off {
		return false
	}
	return readFileCached(b.f, b.res, p, off)
}

// readCached is ReadAt for data in memory: base blocks through the base's
// readCached, overlay blocks from the data file's page cache.
func (o *Overlay) readCached(p []byte, off int64) bool {
	if off < 0 || int64(len(p)) > o.size-off {
		return false
	}
	base, _ := o.base.(sources)
	df, _ := o.data.(*os.File)
	o.mu.RLock()
	defer o.mu.RUnlock()
	_, err := o.eachRun(p, off, func(q []byte, e uint32, in, pos int64) error {
		switch e {
		case entryZero:
			clear(q)
		case entryBase:
			if base == nil || !base.readCached(q, pos) {
				return errNotCached
			}
		default:
			if df == nil || !readFileCached(df, o.dataRes, q, int64(e-1)*o.bs+in) {
				return errNotCached
			}
		}
		return nil
	})
	return err == nil
}

// errNotCached stops eachBlock in readCached and WriteNow.
var errNotCached = errors.New("blockstore: would wait for storage")

// WriteNow is nbd.Store.WriteNow: it writes p at off and returns true
// when it could without waiting: every block it touches is already in the overlay (no copy from
// the base, no map change) and the data file takes the write into memory.
// False means the write must go through WriteAt; part of p may have been
// written already, which a WriteAt of the same bytes then completes.
func (o *Overlay) WriteNow(p []byte, off int64) bool {
	if off < 0 || int64(len(p)) > o.size-off {
		return false
	}
	df, ok := o.data.(*os.File)
	if !ok || o.dataRes == mayWait {
		return false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if !o.holds(off, int64(len(p))) {
		return false
	}
	_, err := o.eachBlock(p, off, func(q []byte, blk, in, _ int64) error {
		if !writeFileCached(df, o.dataRes, &o.nowaitWrites, q, int64(o.entries[blk]-1)*o.bs+in) {
			return errNotCached
		}
		return nil
	})
	return err == nil
}
