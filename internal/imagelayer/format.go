package imagelayer

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
)

// Magic opens every layer file.
const Magic = "BFLAYR1\x00"

// HeaderSize is the fixed part of the header, before the bitmap.
const HeaderSize = 64

// Block sizes a layer may use: 4 KiB to 1 MiB. DefaultBlockShift (64 KiB)
// keeps the bitmap of a 20 GiB image at 40 KiB while a changed file costs
// little more than its own size.
const (
	MinBlockShift     = 12
	MaxBlockShift     = 20
	DefaultBlockShift = 16
	// MaxSize bounds the size a layer describes (16 TiB), so a corrupt
	// header cannot ask for a bitmap of gigabytes.
	MaxSize = 1 << 44
)

// ErrFormat is wrapped by every error about a malformed layer.
var ErrFormat = errors.New("imagelayer: not a valid layer")

// Header is what a layer says about itself.
type Header struct {
	BlockShift uint32 // block size is 1 << BlockShift
	Size       int64  // bytes of the version as served, as its parent's
	Parent     string // hex sha256 of the parent's content
	Count      int64  // blocks the layer holds
}

// BlockSize is 1 << BlockShift.
func (h Header) BlockSize() int64 { return 1 << h.BlockShift }

// Blocks is how many blocks Size spans.
func (h Header) Blocks() int64 { return (h.Size + h.BlockSize() - 1) >> h.BlockShift }

// BitmapLen is the bytes of the bitmap.
func (h Header) BitmapLen() int64 { return (h.Blocks() + 7) / 8 }

// DataOffset is where the first block the layer holds starts.
func (h Header) DataOffset() int64 {
	bs := h.BlockSize()
	return (HeaderSize + h.BitmapLen() + bs - 1) / bs * bs
}

// FileSize is the length of a layer file with this header.
func (h Header) FileSize() int64 { return h.DataOffset() + h.Count*h.BlockSize() }

func (h Header) check() error {
	switch {
	case h.BlockShift < MinBlockShift || h.BlockShift > MaxBlockShift:
		return fmt.Errorf("%w: block shift %d, want %d to %d", ErrFormat, h.BlockShift, MinBlockShift, MaxBlockShift)
	case h.Size <= 0 || h.Size > MaxSize:
		return fmt.Errorf("%w: size %d, want 1 to %d bytes", ErrFormat, h.Size, int64(MaxSize))
	case h.Count < 0 || h.Count > h.Blocks():
		return fmt.Errorf("%w: %d blocks stored, want 0 to the %d blocks of the size", ErrFormat, h.Count, h.Blocks())
	case len(h.Parent) != 64:
		return fmt.Errorf("%w: parent %q, want a hex sha256", ErrFormat, h.Parent)
	}
	if _, err := hex.DecodeString(h.Parent); err != nil {
		return fmt.Errorf("%w: parent %q, want a hex sha256", ErrFormat, h.Parent)
	}
	return nil
}

// AppendHeader appends the fixed header of h to b.
func AppendHeader(b []byte, h Header) ([]byte, error) {
	if err := h.check(); err != nil {
		return b, err
	}
	parent, _ := hex.DecodeString(h.Parent)
	b = append(b, Magic...)
	b = binary.BigEndian.AppendUint32(b, h.BlockShift)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Size))
	b = append(b, parent...)
	return binary.BigEndian.AppendUint64(b, uint64(h.Count)), nil
}

// ParseHeader reads the fixed header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, want a header of %d", ErrFormat, len(b), HeaderSize)
	}
	if string(b[:8]) != Magic {
		return Header{}, fmt.Errorf("%w: magic %q, want %q", ErrFormat, b[:8], Magic)
	}
	if z := binary.BigEndian.Uint32(b[12:16]); z != 0 {
		return Header{}, fmt.Errorf("%w: reserved field %#x, want 0", ErrFormat, z)
	}
	size, count := binary.BigEndian.Uint64(b[16:24]), binary.BigEndian.Uint64(b[56:64])
	h := Header{BlockShift: binary.BigEndian.Uint32(b[8:12]), Parent: hex.EncodeToString(b[24:56])}
	if size > MaxSize || count > MaxSize {
		return Header{}, fmt.Errorf("%w: size %d and %d blocks, want at most %d bytes", ErrFormat, size, count, int64(MaxSize))
	}
	h.Size, h.Count = int64(size), int64(count)
	return h, h.check()
}

// Index says where in the layer file each block the layer holds is.
type Index struct {
	Header
	bitmap []uint64 // bit i%64 of word i/64 for block i
	rank   []uint32 // blocks held before word i
}

// ParseIndex reads a layer's header and bitmap from b, which holds at
// least the file's first DataOffset bytes, and checks that the bitmap
// marks exactly Count blocks, none past the size.
func ParseIndex(b []byte) (*Index, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	n := h.BitmapLen()
	if int64(len(b)) < HeaderSize+n {
		return nil, fmt.Errorf("%w: %d bytes, want the header and a bitmap of %d", ErrFormat, len(b), n)
	}
	return newIndex(h, b[HeaderSize:HeaderSize+n])
}

func newIndex(h Header, bm []byte) (*Index, error) {
	words := (h.Blocks() + 63) / 64
	x := &Index{Header: h, bitmap: make([]uint64, words), rank: make([]uint32, words)}
	for i, c := range bm {
		x.bitmap[i/8] |= uint64(c) << (8 * (i % 8))
	}
	if tail := h.Blocks() % 64; tail != 0 && x.bitmap[words-1]>>tail != 0 {
		return nil, fmt.Errorf("%w: bitmap marks blocks past the %d of the size", ErrFormat, h.Blocks())
	}
	var held int64
	for i, w := range x.bitmap {
		x.rank[i] = uint32(held)
		held += int64(bits.OnesCount64(w))
	}
	if held != h.Count {
		return nil, fmt.Errorf("%w: bitmap marks %d blocks, header says %d", ErrFormat, held, h.Count)
	}
	return x, nil
}

// Has reports whether the layer holds block i.
func (x *Index) Has(i int64) bool {
	return i >= 0 && i < x.Blocks() && x.bitmap[i/64]&(1<<(i%64)) != 0
}

// Offset is where block i starts in the layer file, if the layer holds it.
func (x *Index) Offset(i int64) (int64, bool) {
	if !x.Has(i) {
		return 0, false
	}
	w := x.bitmap[i/64] & (1<<(i%64) - 1)
	k := int64(x.rank[i/64]) + int64(bits.OnesCount64(w))
	return x.DataOffset() + k<<x.BlockShift, true
}

// Bitmap is the bitmap as stored in the file.
func (x *Index) Bitmap() []byte {
	out := make([]byte, x.BitmapLen())
	for i := range out {
		out[i] = byte(x.bitmap[i/8] >> (8 * (i % 8)))
	}
	return out
}
