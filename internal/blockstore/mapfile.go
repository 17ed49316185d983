package blockstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The allocation map file:
//
//	offset 0, one 4 KiB header page:
//	+--------+--------+--------+--------+--------+--------+--------+--------+
//	|                    magic "BFOVMAP1" (64)                              |
//	+--------+--------+--------+--------+--------+--------+--------+--------+
//	|       block size (32)             |     base id length (32)           |
//	+--------+--------+--------+--------+--------+--------+--------+--------+
//	|                    virtual size (64)                                  |
//	+--------+--------+--------+--------+--------+--------+--------+--------+
//	| base id (at most 256 bytes) ... zero padding to 4096                  |
//	+--------+--------+--------+--------+--------+--------+--------+--------+
//	offset 4096: one 32-bit big-endian entry per block of the virtual disk:
//	  0            the block reads from the base image
//	  0xffffffff   the block reads as zeroes (trimmed or write-zeroed)
//	  n            the block is slot n-1 of the data file
//
// The header page is written once, at creation, so map pages never share
// a page with it. Entries are independent and 4-byte aligned, so a map page
// torn by a power cut still holds only valid entries (see Overlay.Flush).
const (
	mapMagic     = "BFOVMAP1"
	mapHeaderLen = 4096
	mapPageLen   = 4096
	entriesPerPg = mapPageLen / 4
	maxBaseIDLen = 256
	entryBase    = 0
	entryZero    = 0xffffffff
	maxSlots     = entryZero - 1
	mapFileName  = "overlay.map"
	dataFileName = "overlay.data"
	defaultBlock = 64 << 10
	minBlockSize = 4 << 10
	maxBlockSize = 1 << 20
)

// ErrDamaged means an overlay's map file is not one this package wrote, or
// was cut short; the overlay cannot be trusted and must be reset.
var ErrDamaged = errors.New("blockstore: overlay map damaged")

type mapHeader struct {
	blockSize uint32
	size      int64
	baseID    string
}

func (h mapHeader) encode() []byte {
	b := make([]byte, mapHeaderLen)
	copy(b, mapMagic)
	binary.BigEndian.PutUint32(b[8:], h.blockSize)
	binary.BigEndian.PutUint32(b[12:], uint32(len(h.baseID)))
	binary.BigEndian.PutUint64(b[16:], uint64(h.size))
	copy(b[24:], h.baseID)
	return b
}

func decodeMapHeader(b []byte) (mapHeader, error) {
	if len(b) < mapHeaderLen {
		return mapHeader{}, fmt.Errorf("map header: got %d bytes, want %d: %w", len(b), mapHeaderLen, ErrDamaged)
	}
	if !bytes.Equal(b[:8], []byte(mapMagic)) {
		return mapHeader{}, fmt.Errorf("map header: got magic %q, want %q: %w", b[:8], mapMagic, ErrDamaged)
	}
	h := mapHeader{
		blockSize: binary.BigEndian.Uint32(b[8:]),
		size:      int64(binary.BigEndian.Uint64(b[16:])),
	}
	n := binary.BigEndian.Uint32(b[12:])
	if n > maxBaseIDLen {
		return mapHeader{}, fmt.Errorf("map header: base id length %d, want at most %d: %w", n, maxBaseIDLen, ErrDamaged)
	}
	if err := checkBlockSize(int(h.blockSize)); err != nil || h.size < 0 {
		return mapHeader{}, fmt.Errorf("map header: block size %d, size %d: %w", h.blockSize, h.size, ErrDamaged)
	}
	h.baseID = string(b[24 : 24+n])
	return h, nil
}

func checkBlockSize(bs int) error {
	if bs < minBlockSize || bs > maxBlockSize || bs&(bs-1) != 0 {
		return fmt.Errorf("blockstore: block size %d: want a power of two from %d to %d", bs, minBlockSize, maxBlockSize)
	}
	return nil
}

func numBlocks(size int64, bs int) int64 { return (size + int64(bs) - 1) / int64(bs) }

// mapFileLen is the map file size for n blocks, rounded up to whole pages.
func mapFileLen(n int64) int64 {
	return mapHeaderLen + (n+entriesPerPg-1)/entriesPerPg*mapPageLen
}
