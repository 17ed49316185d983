package blockstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Flush makes every write that returned before it durable. Order:
//
//  1. snapshot the changed map pages and the slots released since the
//     last Flush (under the lock, so each snapshotted entry's data write
//     has already returned);
//  2. fsync the data file: the blocks those entries point at are on disk;
//  3. write the map pages and fsync the map file: the entries are on disk;
//  4. only now put the released slots back in the free list.
//
// After a crash (kill -9 or power loss) the map on disk therefore points
// only at data that reached the disk, and never at a slot that was reused
// for another block after the last Flush. Writes after the last Flush may
// be lost, which NBD allows for writes without FUA or a completed FLUSH.
func (o *Overlay) Flush() error {
	o.flushMu.Lock()
	defer o.flushMu.Unlock()

	o.mu.RLock()
	pages := make([]int64, 0, len(o.dirty))
	for pg := range o.dirty {
		pages = append(pages, pg)
	}
	slices.Sort(pages)
	bufs := make([][]byte, len(pages))
	for i, pg := range pages {
		bufs[i] = o.encodePage(pg)
	}
	released := o.pending
	o.mu.RUnlock()
	// Pages and released slots are taken out only after the writes below
	// succeed, so a failed Flush is retried in full by the next one.

	if err := o.data.Sync(); err != nil {
		return fmt.Errorf("blockstore: sync overlay data: %w", err)
	}
	for i, pg := range pages {
		if _, err := o.mapf.WriteAt(bufs[i], mapHeaderLen+pg*mapPageLen); err != nil {
			return fmt.Errorf("blockstore: write overlay map: %w", err)
		}
	}
	if len(pages) > 0 {
		if err := o.mapf.Sync(); err != nil {
			return fmt.Errorf("blockstore: sync overlay map: %w", err)
		}
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	for i, pg := range pages {
		// A page changed again after the snapshot stays dirty.
		if slices.Equal(bufs[i], o.encodePage(pg)) {
			delete(o.dirty, pg)
		}
	}
	o.free = append(o.free, released...)
	o.pending = slices.Delete(o.pending, 0, len(released))
	return nil
}

// encodePage renders one map page from the in-memory entries; mu held.
func (o *Overlay) encodePage(pg int64) []byte {
	b := make([]byte, mapPageLen)
	first := pg * entriesPerPg
	last := min(first+entriesPerPg, int64(len(o.entries)))
	for i := first; i < last; i++ {
		binary.BigEndian.PutUint32(b[4*(i-first):], o.entries[i])
	}
	return b
}

// Reset discards every write: the disk reads as the base again. It costs
// two truncates and two fsyncs whatever the overlay's size. The map is
// cleared (and synced) before the data is dropped, so a crash in between
// leaves a consistent, empty overlay.
func (o *Overlay) Reset() error {
	o.flushMu.Lock()
	defer o.flushMu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	h := mapHeader{blockSize: uint32(o.bs), size: o.size}
	raw := make([]byte, mapHeaderLen)
	if _, err := o.mapf.ReadAt(raw, 0); err == nil {
		if old, err := decodeMapHeader(raw); err == nil {
			h.baseID = old.baseID
		}
	}
	clear(o.entries)
	o.dirty = map[int64]struct{}{}
	o.free, o.pending, o.nextSlot = nil, nil, 0
	if err := o.create(h); err != nil {
		return err
	}
	if err := o.data.Truncate(0); err != nil {
		return fmt.Errorf("blockstore: truncate overlay data: %w", err)
	}
	return o.data.Sync()
}

// Close flushes a persistent overlay and closes its files; an ephemeral
// overlay's files are removed instead. It does not close the base.
func (o *Overlay) Close() error {
	var err error
	if o.mode == Persistent {
		err = o.Flush()
	}
	o.closeFiles()
	if o.mode == Ephemeral {
		err = errors.Join(err, RemoveOverlay(o.dir))
	}
	return err
}

func (o *Overlay) closeFiles() {
	if o.data != nil {
		o.data.Close()
	}
	if o.unlock != nil {
		o.unlock()
	}
	o.mapf.Close()
}

// RemoveOverlay deletes the overlay files in dir, for `machine reset` of a
// machine that is not connected: its next open starts empty. The map goes
// first, so a crash in between leaves no map, which opens as empty.
func RemoveOverlay(dir string) error {
	for _, name := range []string{mapFileName, dataFileName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("blockstore: remove overlay: %w", err)
		}
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("blockstore: overlay: %w", err)
	}
	return nil
}
