package blockset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Sentinel errors of Parse; it wraps them with what was wrong.
var (
	// ErrShort means the encoding ends inside a field.
	ErrShort = errors.New("blockset: encoding too short")
	// ErrVersion means the encoding is of another version or form.
	ErrVersion = errors.New("blockset: unsupported version")
	// ErrMalformed means a field is out of range, extents overlap or wrap,
	// or bytes follow the set.
	ErrMalformed = errors.New("blockset: malformed encoding")
)

const (
	version = 1
	// HeaderLen is the fixed part of an encoding.
	HeaderLen = 4
	// MinBlockShift and MaxBlockShift bound the block size: 512 bytes
	// (a sector) to 1 GiB.
	MinBlockShift = 9
	MaxBlockShift = 30

	formExtents = 0
	formBitmap  = 1
)

// Append appends the encoding of s, whose blocks are 1<<blockShift bytes,
// to dst: the extent form or the bitmap form, whichever is smaller.
//
//	+-----------+-------------+-----------+-----------+
//	| version 1 | block shift |   form    |  0 (rsv)  |
//	+-----------+-------------+-----------+-----------+
//
// form 0, extents:
//
//	uvarint n, then n times: uvarint gap, uvarint length-1
//
// where the first gap is the first extent's start and every later gap is
// the number of blocks between the previous extent's end and the start,
// less one (extents never touch, so a gap is at least one block).
//
// form 1, bitmap:
//
//	uvarint first block, uvarint nbits, then ceil(nbits/8) bytes
//
// where bit i (byte i/8, bit i%8 from the least significant) is block
// first+i; the first and the last bit are set and the unused high bits of
// the last byte are zero.
//
// Varints are encoding/binary's unsigned varints. Append panics if
// blockShift is outside MinBlockShift..MaxBlockShift, a caller's bug.
func (s *Set) Append(dst []byte, blockShift uint8) []byte {
	if blockShift < MinBlockShift || blockShift > MaxBlockShift {
		panic(fmt.Sprintf("blockset: block shift %d, want %d to %d", blockShift, MinBlockShift, MaxBlockShift))
	}
	if s.bitmapLen() < s.extentsLen() {
		return s.appendBitmap(append(dst, version, blockShift, formBitmap, 0))
	}
	return s.appendExtents(append(dst, version, blockShift, formExtents, 0))
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// gaps calls f with each extent's encoded gap and length-1.
func (s *Set) gaps(f func(gap, lenMinus1 uint64)) {
	var prevEnd uint64
	for i, e := range s.ext {
		gap := e.Start
		if i > 0 {
			gap = e.Start - prevEnd - 1
		}
		f(gap, e.Len-1)
		prevEnd = e.End()
	}
}

func (s *Set) extentsLen() int {
	n := uvarintLen(uint64(len(s.ext)))
	s.gaps(func(gap, l uint64) { n += uvarintLen(gap) + uvarintLen(l) })
	return n
}

func (s *Set) appendExtents(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.ext)))
	s.gaps(func(gap, l uint64) {
		dst = binary.AppendUvarint(dst, gap)
		dst = binary.AppendUvarint(dst, l)
	})
	return dst
}

// span is the first block and the number of blocks from it to the last.
func (s *Set) span() (first, n uint64) {
	if len(s.ext) == 0 {
		return 0, 0
	}
	first = s.ext[0].Start
	return first, s.ext[len(s.ext)-1].End() - first
}

func (s *Set) bitmapLen() int {
	first, n := s.span()
	if n > math.MaxInt32 {
		return math.MaxInt // a bitmap of 256 MiB or more never wins
	}
	return uvarintLen(first) + uvarintLen(n) + int((n+7)/8)
}

func (s *Set) appendBitmap(dst []byte) []byte {
	first, n := s.span()
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, n)
	base := len(dst)
	dst = append(dst, make([]byte, (n+7)/8)...)
	bm := dst[base:]
	for _, e := range s.ext {
		for b := e.Start - first; b < e.End()-first; b++ {
			bm[b/8] |= 1 << (b % 8)
		}
	}
	return dst
}

// Parse decodes an encoding written by Append: the set and the block
// shift. Every form Append writes is accepted; nothing else is.
func Parse(b []byte) (*Set, uint8, error) {
	if len(b) < HeaderLen {
		return nil, 0, fmt.Errorf("%w: %d bytes, want a %d-byte header", ErrShort, len(b), HeaderLen)
	}
	if b[0] != version {
		return nil, 0, fmt.Errorf("%w: got version %d, want %d", ErrVersion, b[0], version)
	}
	shift := b[1]
	if shift < MinBlockShift || shift > MaxBlockShift {
		return nil, 0, fmt.Errorf("%w: block shift %d, want %d to %d", ErrMalformed, shift, MinBlockShift, MaxBlockShift)
	}
	if b[3] != 0 {
		return nil, 0, fmt.Errorf("%w: reserved byte %#02x, want 0", ErrMalformed, b[3])
	}
	r := reader{b: b[HeaderLen:]}
	var s *Set
	var err error
	switch b[2] {
	case formExtents:
		s, err = r.extents()
	case formBitmap:
		s, err = r.bitmap()
	default:
		return nil, 0, fmt.Errorf("%w: form %d, want %d (extents) or %d (bitmap)", ErrVersion, b[2], formExtents, formBitmap)
	}
	if err != nil {
		return nil, 0, err
	}
	if len(r.b) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes follow the set", ErrMalformed, len(r.b))
	}
	return s, shift, nil
}

type reader struct{ b []byte }

func (r *reader) uvarint(what string) (uint64, error) {
	x, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: encoding ends in %s", ErrShort, what)
	case n < 0 || n != uvarintLen(x):
		return 0, fmt.Errorf("%w: %s is not a minimal 64-bit varint", ErrMalformed, what)
	}
	r.b = r.b[n:]
	return x, nil
}

func (r *reader) extents() (*Set, error) {
	n, err := r.uvarint("extent count")
	if err != nil {
		return nil, err
	}
	// Each extent takes two bytes at least: a count beyond that is a lie
	// that must not size an allocation.
	if n > uint64(len(r.b)/2) {
		return nil, fmt.Errorf("%w: %d extents in %d bytes", ErrShort, n, len(r.b))
	}
	s := &Set{ext: make([]Extent, 0, n)}
	var prevEnd uint64
	for i := range n {
		gap, err := r.uvarint("extent gap")
		if err != nil {
			return nil, err
		}
		l, err := r.uvarint("extent length")
		if err != nil {
			return nil, err
		}
		start := gap
		if i > 0 {
			if prevEnd > math.MaxUint64-2 || gap > math.MaxUint64-2-prevEnd {
				return nil, fmt.Errorf("%w: extent %d starts past block 2^64", ErrMalformed, i)
			}
			start = prevEnd + 1 + gap
		}
		if l >= math.MaxUint64-start {
			return nil, fmt.Errorf("%w: extent %d of %d blocks from %d ends past block 2^64-1", ErrMalformed, i, l+1, start)
		}
		e := Extent{start, l + 1}
		s.ext = append(s.ext, e)
		prevEnd = e.End()
	}
	return s, nil
}

func (r *reader) bitmap() (*Set, error) {
	first, err := r.uvarint("bitmap start")
	if err != nil {
		return nil, err
	}
	n, err := r.uvarint("bitmap length")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > uint64(len(r.b))*8 || uint64(len(r.b)) != (n+7)/8 || n > math.MaxUint64-first {
		return nil, fmt.Errorf("%w: bitmap of %d bits from block %d in %d bytes", ErrMalformed, n, first, len(r.b))
	}
	bm := r.b
	r.b = nil
	bit := func(i uint64) bool { return bm[i/8]&(1<<(i%8)) != 0 }
	if !bit(0) || !bit(n-1) || bm[len(bm)-1]>>((n-1)%8+1) != 0 {
		return nil, fmt.Errorf("%w: bitmap does not start and end with a set bit", ErrMalformed)
	}
	s := &Set{}
	for i := uint64(0); i < n; {
		if !bit(i) {
			i++
			continue
		}
		j := i
		for j < n && bit(j) {
			j++
		}
		s.ext = append(s.ext, Extent{first + i, j - i})
		i = j
	}
	return s, nil
}
