package blockset

import (
	"math"
	"slices"
)

// Extent is Len blocks from Start.
type Extent struct {
	Start, Len uint64
}

// End is the block after the extent.
func (e Extent) End() uint64 { return e.Start + e.Len }

// Set is a set of block numbers. The zero Set is empty and ready to use.
// A Set is not safe for concurrent use.
type Set struct {
	// ext is sorted by Start; extents neither overlap nor touch, so every
	// set has exactly one form and the encoding is canonical.
	ext []Extent
}

// Add puts block in the set.
func (s *Set) Add(block uint64) { s.AddRange(block, 1) }

// AddRange puts the n blocks from first in the set. Block 2^64-1 is the
// one block no set can hold: a range that reaches it is cut before it.
// Adding at the end of the set or inside one extent is O(log n); anywhere
// else the extents after it move, O(n), so build a large set in block
// order, or build two and Merge them.
func (s *Set) AddRange(first, n uint64) {
	if n == 0 {
		return
	}
	if n > math.MaxUint64-first {
		n = math.MaxUint64 - first
	}
	e := Extent{first, n}
	// i: the first extent that ends at or after e starts (it may merge);
	// j: the first extent that starts after e ends (it may not).
	i, _ := slices.BinarySearchFunc(s.ext, e.Start, func(x Extent, b uint64) int {
		if x.End() < b {
			return -1
		}
		return 1
	})
	j := i
	for j < len(s.ext) && s.ext[j].Start <= e.End() {
		j++
	}
	if i < j {
		start := min(e.Start, s.ext[i].Start)
		end := max(e.End(), s.ext[j-1].End())
		e = Extent{start, end - start}
	}
	s.ext = slices.Replace(s.ext, i, j, e)
}

// Has reports whether block is in the set.
func (s *Set) Has(block uint64) bool {
	return s.Overlaps(block, 1)
}

// Overlaps reports whether any of the n blocks from first is in the set:
// the agent asks it for a cache chunk, which spans several overlay blocks
// when the overlay's blocks are smaller than the chunk.
func (s *Set) Overlaps(first, n uint64) bool {
	if n == 0 {
		return false
	}
	// The last extent that starts at or before the range's last block.
	last := first + min(n-1, math.MaxUint64-first)
	i, _ := slices.BinarySearchFunc(s.ext, last, func(x Extent, b uint64) int {
		if x.Start <= b {
			return -1
		}
		return 1
	})
	return i > 0 && s.ext[i-1].End() > first
}

// Merge adds every block of o to s.
func (s *Set) Merge(o *Set) {
	if len(o.ext) == 0 {
		return
	}
	out := make([]Extent, 0, len(s.ext)+len(o.ext))
	a, b := s.ext, o.ext
	for len(a) > 0 || len(b) > 0 {
		var e Extent
		if len(b) == 0 || (len(a) > 0 && a[0].Start <= b[0].Start) {
			e, a = a[0], a[1:]
		} else {
			e, b = b[0], b[1:]
		}
		if n := len(out); n > 0 && out[n-1].End() >= e.Start {
			out[n-1].Len = max(out[n-1].End(), e.End()) - out[n-1].Start
			continue
		}
		out = append(out, e)
	}
	s.ext = out
}

// Blocks is how many blocks the set holds.
func (s *Set) Blocks() uint64 {
	var n uint64
	for _, e := range s.ext {
		n += e.Len
	}
	return n
}

// Extents is the set as sorted, disjoint, non-touching extents. The slice
// is the set's own: do not modify it.
func (s *Set) Extents() []Extent { return s.ext }

// Equal reports whether s and o hold the same blocks.
func (s *Set) Equal(o *Set) bool { return slices.Equal(s.ext, o.ext) }
