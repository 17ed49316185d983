package blockstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Options tune an Overlay.
type Options struct {
	// BlockSize is the overlay's allocation unit: a write to a block the
	// overlay does not hold yet copies the whole block from the base first.
	// Smaller blocks waste less space and copy less; larger blocks keep the
	// map small. Default 64 KiB; a power of two from 4 KiB to 1 MiB. An
	// existing persistent overlay keeps the block size it was made with.
	BlockSize int
	// BaseID identifies the base image (e.g. its sha256), at most 256
	// bytes. A persistent overlay made on another base is refused, since
	// its blocks would mix with the wrong image. Empty: not checked.
	BaseID string
}

// file is what an Overlay needs from its data file; tests substitute one
// that runs out of space.
type file interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(int64) error
	Close() error
}

// Overlay is a copy-on-write layer over a Base. Reads come from the
// overlay where it holds the block, else from the base; writes allocate
// overlay blocks. It is safe for concurrent use: reads run in parallel,
// writes are serialized.
type Overlay struct {
	base    Base
	dir     string
	mode    Mode
	bs      int64
	size    int64
	mapf    *os.File
	data    file
	dataRes residency
	// nowaitWrites is cleared once the data file refuses RWF_NOWAIT writes.
	nowaitWrites atomic.Bool
	flushMu      sync.Mutex // one Flush at a time
	mu           sync.RWMutex
	entries      []uint32
	dirty        map[int64]struct{} // map pages changed since the last Flush
	free         []uint32           // slots no entry on disk or in memory uses
	pending      []uint32           // slots released since the last Flush
	nextSlot     uint32             // first slot never used
	unlock       func()
}

// OpenOverlay opens the overlay of base in dir (created if needed) for
// mode Ephemeral or Persistent. Only one Overlay may have dir open at a
// time, across processes; a second open fails.
func OpenOverlay(base Base, dir string, mode Mode, opts Options) (*Overlay, error) {
	if mode != Ephemeral && mode != Persistent {
		return nil, fmt.Errorf("blockstore: overlay mode %v: want ephemeral or persistent", mode)
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = defaultBlock
	}
	if err := checkBlockSize(bs); err != nil {
		return nil, err
	}
	if len(opts.BaseID) > maxBaseIDLen {
		return nil, fmt.Errorf("blockstore: base id of %d bytes, want at most %d", len(opts.BaseID), maxBaseIDLen)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blockstore: overlay dir: %w", err)
	}
	mapPath := filepath.Join(dir, mapFileName)
	mapf, err := os.OpenFile(mapPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("blockstore: open overlay map: %w", err)
	}
	unlock, err := lockFile(mapf)
	if err != nil {
		mapf.Close()
		return nil, fmt.Errorf("blockstore: overlay %s is in use by another session (close it, or stop the other server): %w", dir, err)
	}
	o := &Overlay{base: base, dir: dir, mode: mode, bs: int64(bs), size: base.Size(), mapf: mapf, unlock: unlock, dirty: map[int64]struct{}{}}
	if err := o.load(opts); err != nil {
		o.closeFiles()
		return nil, err
	}
	return o, nil
}

// load reads an existing persistent overlay or creates a fresh one.
func (o *Overlay) load(opts Options) error {
	st, err := o.mapf.Stat()
	if err != nil {
		return fmt.Errorf("blockstore: stat overlay map: %w", err)
	}
	fresh := o.mode == Ephemeral || st.Size() == 0
	dataFlags := os.O_RDWR | os.O_CREATE
	if fresh {
		dataFlags |= os.O_TRUNC
	}
	df, err := os.OpenFile(filepath.Join(o.dir, dataFileName), dataFlags, 0o600)
	if err != nil {
		return fmt.Errorf("blockstore: open overlay data: %w", err)
	}
	o.data = df
	adviseRandom(df)
	o.dataRes = probeResidency(df)
	o.nowaitWrites.Store(true)
	n := numBlocks(o.size, int(o.bs))
	if fresh {
		o.entries = make([]uint32, n)
		return o.create(mapHeader{blockSize: uint32(o.bs), size: o.size, baseID: opts.BaseID})
	}
	raw, err := os.ReadFile(o.mapf.Name())
	if err != nil {
		return fmt.Errorf("blockstore: read overlay map: %w", err)
	}
	h, err := decodeMapHeader(raw)
	if err != nil {
		return fmt.Errorf("blockstore: overlay %s: %w; reset the machine's overlay", o.dir, err)
	}
	if h.size != o.size {
		return fmt.Errorf("blockstore: overlay %s was made for a base of %d bytes, the base has %d; reset the machine's overlay", o.dir, h.size, o.size)
	}
	if opts.BaseID != "" && h.baseID != opts.BaseID {
		return fmt.Errorf("blockstore: overlay %s was made on base %q, not %q; reset the machine's overlay", o.dir, h.baseID, opts.BaseID)
	}
	o.bs = int64(h.blockSize)
	n = numBlocks(o.size, int(o.bs))
	if int64(len(raw)) < mapFileLen(n) {
		return fmt.Errorf("blockstore: overlay %s: map has %d bytes, want %d: %w; reset the machine's overlay", o.dir, len(raw), mapFileLen(n), ErrDamaged)
	}
	o.entries = make([]uint32, n)
	used := make(map[uint32]bool)
	for i := range o.entries {
		e := binary.BigEndian.Uint32(raw[mapHeaderLen+4*i:])
		o.entries[i] = e
		if e != entryBase && e != entryZero {
			if used[e-1] {
				return fmt.Errorf("blockstore: overlay %s: slot %d used by two blocks: %w; reset the machine's overlay", o.dir, e-1, ErrDamaged)
			}
			used[e-1] = true
			o.nextSlot = max(o.nextSlot, e)
		}
	}
	for s := range o.nextSlot {
		if !used[s] {
			o.free = append(o.free, s)
		}
	}
	return nil
}

// create writes an empty map. The header is synced before any block can
// be written, so a crash leaves either no map or a valid empty one.
func (o *Overlay) create(h mapHeader) error {
	if err := o.mapf.Truncate(0); err != nil {
		return fmt.Errorf("blockstore: reset overlay map: %w", err)
	}
	if _, err := o.mapf.WriteAt(h.encode(), 0); err != nil {
		return fmt.Errorf("blockstore: write overlay map header: %w", err)
	}
	if err := o.mapf.Truncate(mapFileLen(int64(len(o.entries)))); err != nil {
		return fmt.Errorf("blockstore: size overlay map: %w", err)
	}
	if err := o.mapf.Sync(); err != nil {
		return fmt.Errorf("blockstore: sync overlay map: %w", err)
	}
	if err := durable.SyncDir(o.dir); err != nil {
		return fmt.Errorf("blockstore: overlay: %w", err)
	}
	return nil
}

// Size is the virtual disk size, the base's size.
func (o *Overlay) Size() int64 { return o.size }

// ReadOnly is false: an Overlay takes writes.
func (o *Overlay) ReadOnly() bool { return false }

// BlockSize is the allocation unit in bytes.
func (o *Overlay) BlockSize() int { return int(o.bs) }

func (o *Overlay) checkRange(op string, off, n int64) error {
	if off < 0 || n < 0 || off > o.size || n > o.size-off {
		return fmt.Errorf("blockstore: %s of %d bytes at %d is outside the disk of %d bytes: %w", op, n, off, o.size, syscall.EINVAL)
	}
	return nil
}

// ReadAt reads from the overlay where it holds the block, else from the
// base. It returns io.EOF only for a read that runs past the end.
func (o *Overlay) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > o.size {
		return 0, o.checkRange("read", off, int64(len(p)))
	}
	var eof error
	if int64(len(p)) > o.size-off {
		p, eof = p[:o.size-off], io.EOF
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	done, err := o.eachRun(p, off, o.readBlock)
	if err != nil {
		return done, err
	}
	return done, eof
}

// eachBlock calls fn, in order, with the part q of p that falls in each
// block of [off, off+len(p)): blk is the block, in the offset of q inside
// it, pos the disk offset of q. It stops at fn's first error and returns
// the bytes of p done before it.
func (o *Overlay) eachBlock(p []byte, off int64, fn func(q []byte, blk, in, pos int64) error) (int, error) {
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		blk, in := pos/o.bs, pos%o.bs
		c := int(min(o.bs-in, int64(len(p)-done)))
		if err := fn(p[done:done+c], blk, in, pos); err != nil {
			return done, err
		}
		done += c
	}
	return done, nil
}

// eachRun is eachBlock over runs of blocks that read from one place in one
// call: base blocks, zero blocks, or overlay blocks in consecutive slots.
// A 256 KiB read of the base is then one pread, not four, which also lets
// the kernel's readahead see one large sequential reader. fn gets the
// run's first map entry e, with in and pos as eachBlock gives them.
func (o *Overlay) eachRun(p []byte, off int64, fn func(q []byte, e uint32, in, pos int64) error) (int, error) {
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		blk, in := pos/o.bs, pos%o.bs
		e := o.entries[blk]
		c := int(min(o.bs-in, int64(len(p)-done)))
		for next := blk + 1; done+c < len(p) && runsOn(e, o.entries[next], next-blk); next++ {
			c += int(min(o.bs, int64(len(p)-done-c)))
		}
		if err := fn(p[done:done+c], e, in, pos); err != nil {
			return done, err
		}
		done += c
	}
	return done, nil
}

// runsOn says whether the block k places after one with entry first reads
// on from where that block left off, when its entry is e.
func runsOn(first, e uint32, k int64) bool {
	if first == entryBase || first == entryZero {
		return e == first
	}
	return e != entryBase && e != entryZero && int64(e) == int64(first)+k
}

// The overlay's sources are its base's, for a range every block of which
// reads from the base. A base block never changes, and a write after the
// check goes to an overlay block, never into the base, so the bytes stay
// the ones the range read when it began.

func (o *Overlay) fileSpan(off, n int64) (*os.File, int64, bool) {
	s, ok := o.base.(sources)
	if !ok {
		return nil, 0, false
	}
	// The base answers first: on a disk it never offers spans, and then
	// the map need not be scanned under the lock for every large READ.
	f, foff, ok := s.fileSpan(off, n)
	if !ok || !o.allBase(off, n) {
		return nil, 0, false
	}
	return f, foff, true
}

func (o *Overlay) loadable(off, n int64) bool {
	s, ok := o.base.(sources)
	return ok && s.loadable(off, n) && o.allBase(off, n)
}

func (o *Overlay) loadSpan(off, n int64) ([]byte, bool) {
	s, ok := o.base.(sources)
	if !ok || !o.allBase(off, n) {
		return nil, false
	}
	return s.loadSpan(off, n)
}

func (o *Overlay) mappedSpan(off, n int64) ([]byte, bool) {
	s, ok := o.base.(sources)
	if !ok || !o.allBase(off, n) {
		return nil, false
	}
	return s.mappedSpan(off, n)
}

// allBase says whether every block of [off, off+n) reads from the base.
func (o *Overlay) allBase(off, n int64) bool {
	if n <= 0 || o.checkRange("read", off, n) != nil {
		return false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	for blk := off / o.bs; blk <= (off+n-1)/o.bs; blk++ {
		if o.entries[blk] != entryBase {
			return false
		}
	}
	return true
}

// readBlock fills p from one block whose map entry is e; in is the offset
// inside the block, pos the disk offset.
func (o *Overlay) readBlock(p []byte, e uint32, in, pos int64) error {
	switch e {
	case entryZero:
		clear(p)
		return nil
	case entryBase:
		n, err := o.base.ReadAt(p, pos)
		if n == len(p) {
			return nil
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("blockstore: read base at %d: %w", pos, err)
	}
	if _, err := o.data.ReadAt(p, int64(e-1)*o.bs+in); err != nil {
		return fmt.Errorf("blockstore: read overlay block %d: %w", pos/o.bs, err)
	}
	return nil
}

// WriteAt writes p at off. A block the overlay does not hold yet is copied
// whole into a new slot, merged with p, before its map entry points at it,
// so a failed write (ENOSPC) leaves the block as it was. Errors wrap the
// OS error: errors.Is(err, syscall.ENOSPC) tells a full disk.
func (o *Overlay) WriteAt(p []byte, off int64) (int, error) {
	if err := o.checkRange("write", off, int64(len(p))); err != nil {
		return 0, err
	}
	// Writes into blocks the overlay already holds change no entry, so
	// they run in parallel under the read lock; only allocation needs the
	// write lock.
	o.mu.RLock()
	if o.holds(off, int64(len(p))) {
		n, err := o.write(p, off)
		o.mu.RUnlock()
		return n, err
	}
	o.mu.RUnlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.write(p, off)
}

// holds reports whether every block of [off, off+n) has an overlay slot;
// mu held.
func (o *Overlay) holds(off, n int64) bool {
	if n <= 0 {
		return true
	}
	for blk := off / o.bs; blk <= (off+n-1)/o.bs; blk++ {
		if e := o.entries[blk]; e == entryBase || e == entryZero {
			return false
		}
	}
	return true
}

// write is WriteAt with mu held (the read lock will do when holds says
// so). A nil p writes zeroes.
func (o *Overlay) write(p []byte, off int64) (int, error) {
	return o.eachBlock(p, off, func(q []byte, blk, in, _ int64) error { return o.writeBlock(blk, in, q) })
}

func (o *Overlay) writeBlock(blk, in int64, p []byte) error {
	e := o.entries[blk]
	if e != entryBase && e != entryZero {
		if _, err := o.data.WriteAt(p, int64(e-1)*o.bs+in); err != nil {
			return fmt.Errorf("blockstore: write overlay block %d: %w", blk, err)
		}
		return nil
	}
	block := make([]byte, o.bs)
	if e == entryBase {
		start := blk * o.bs
		want := min(o.bs, o.size-start)
		if err := o.readBlock(block[:want], entryBase, 0, start); err != nil {
			return err
		}
	}
	copy(block[in:], p)
	slot, err := o.alloc()
	if err != nil {
		return err
	}
	if err := o.writeFresh(block, int64(slot)*o.bs); err != nil {
		// The slot was never in any map, so it can be reused at once.
		o.free = append(o.free, slot)
		return fmt.Errorf("blockstore: allocate overlay block %d: %w", blk, err)
	}
	o.setEntry(blk, slot+1)
	return nil
}

// writeFresh writes a block copied into a new slot at at. On a disk's
// file system it goes a page at a time: the page cache keeps one write's
// bytes in folios as large as the write, and on ext4 (Linux 6.16 and
// later) every later small write into a large folio walks all of its
// buffer heads. Memory file systems take the block whole.
func (o *Overlay) writeFresh(block []byte, at int64) error {
	step := len(block)
	if o.dataRes != inMemory {
		step = os.Getpagesize()
	}
	for i := 0; i < len(block); i += step {
		if _, err := o.data.WriteAt(block[i:min(i+step, len(block))], at+int64(i)); err != nil {
			return err
		}
	}
	return nil
}

func (o *Overlay) alloc() (uint32, error) {
	if n := len(o.free); n > 0 {
		s := o.free[n-1]
		o.free = o.free[:n-1]
		return s, nil
	}
	if o.nextSlot >= maxSlots {
		return 0, fmt.Errorf("blockstore: overlay %s has no free slot: %w", o.dir, syscall.ENOSPC)
	}
	o.nextSlot++
	return o.nextSlot - 1, nil
}

// setEntry changes a block's entry; a slot it drops waits in pending until
// the next Flush has recorded the change on disk (see Flush).
func (o *Overlay) setEntry(blk int64, e uint32) {
	if old := o.entries[blk]; old != entryBase && old != entryZero && old != e {
		o.pending = append(o.pending, old-1)
	}
	o.entries[blk] = e
	o.dirty[blk/entriesPerPg] = struct{}{}
}

// Trim drops the blocks the range covers whole; they read as zeroes
// afterwards. Partly covered blocks are left alone, which NBD allows.
func (o *Overlay) Trim(off, n int64) error {
	if err := o.checkRange("trim", off, n); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	first, last := o.wholeBlocks(off, n)
	for b := first; b < last; b++ {
		o.setEntry(b, entryZero)
	}
	return nil
}

// wholeBlocks returns the blocks [first, last) that [off, off+n) covers
// entirely. The disk's last block counts as whole when the range reaches
// the end of the disk.
func (o *Overlay) wholeBlocks(off, n int64) (first, last int64) {
	first = (off + o.bs - 1) / o.bs
	end := off + n
	if end == o.size {
		last = numBlocks(o.size, int(o.bs))
	} else {
		last = end / o.bs
	}
	return first, max(first, last)
}

// WriteZeroes makes the range read as zeroes. Whole blocks become map-only
// zero entries and release their slots, unless noHole asks for the space
// to stay allocated; partial blocks are written with zeroes.
func (o *Overlay) WriteZeroes(off, n int64, noHole bool) error {
	if err := o.checkRange("write zeroes", off, n); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	first, last := o.wholeBlocks(off, n)
	if noHole || first >= last {
		return o.writeZeroRange(off, n)
	}
	if err := o.writeZeroRange(off, first*o.bs-off); err != nil {
		return err
	}
	for b := first; b < last; b++ {
		o.setEntry(b, entryZero)
	}
	end := min(last*o.bs, o.size)
	return o.writeZeroRange(end, off+n-end)
}

// writeZeroRange writes real zeroes, a bounded buffer at a time.
func (o *Overlay) writeZeroRange(off, n int64) error {
	if n <= 0 {
		return nil
	}
	z := make([]byte, min(n, 1<<20))
	for n > 0 {
		c := min(n, int64(len(z)))
		if _, err := o.write(z[:c], off); err != nil {
			return err
		}
		off, n = off+c, n-c
	}
	return nil
}
