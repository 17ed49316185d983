package readorder

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxChunks bounds an order: 1<<20 chunks of 32 KiB is 32 GiB of
// content read, more than any boot reads. The file stays below 5 MiB,
// and the server's memory of it below a few tens of MiB.
const MaxChunks = 1 << 20

// magic opens every order file; its last byte is the format version.
const magic = "BFRO\x01"

// Errors Decode wraps.
var (
	ErrMagic     = errors.New("readorder: not an order file")
	ErrMalformed = errors.New("readorder: malformed order")
)

// Encode returns the file of order: the magic, the count as a uvarint,
// then each chunk as the zigzag varint of its distance from the one
// before plus one, so a sequential run costs a byte a chunk.
//
//	"BFRO" 0x01 | uvarint count | varint (chunk[i] - chunk[i-1] - 1) ...
//
// chunk[-1] is -1. Encode does not check order; Decode refuses what it
// should not have been given (duplicates, more than MaxChunks).
func Encode(order []uint32) []byte {
	b := make([]byte, 0, len(magic)+binary.MaxVarintLen64+2*len(order))
	b = append(b, magic...)
	b = binary.AppendUvarint(b, uint64(len(order)))
	prev := int64(-1)
	for _, c := range order {
		b = binary.AppendVarint(b, int64(c)-prev-1)
		prev = int64(c)
	}
	return b
}

// Decode parses a file Encode wrote: each chunk at most once, at most
// MaxChunks of them.
func Decode(b []byte) ([]uint32, error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: got %q, want %q", ErrMagic, b[:min(len(b), len(magic))], magic)
	}
	b = b[len(magic):]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("%w: no chunk count", ErrMalformed)
	}
	if n > MaxChunks || n > uint64(len(b)-k) {
		return nil, fmt.Errorf("%w: %d chunks in %d bytes, want at most %d and a byte each", ErrMalformed, n, len(b)-k, MaxChunks)
	}
	b = b[k:]
	order := make([]uint32, 0, n)
	seen := make(map[uint32]struct{}, n)
	prev := int64(-1)
	for i := range n {
		d, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: chunk %d of %d is cut short", ErrMalformed, i, n)
		}
		b = b[k:]
		c := prev + 1 + d
		if d < -(1<<33) || d > 1<<33 || c < 0 || c > 1<<32-1 {
			return nil, fmt.Errorf("%w: chunk %d of %d is %d, want 0 to %d", ErrMalformed, i, n, c, uint32(1<<32-1))
		}
		if _, dup := seen[uint32(c)]; dup {
			return nil, fmt.Errorf("%w: chunk %d appears twice", ErrMalformed, c)
		}
		seen[uint32(c)] = struct{}{}
		order = append(order, uint32(c))
		prev = c
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last chunk", ErrMalformed, len(b))
	}
	return order, nil
}
