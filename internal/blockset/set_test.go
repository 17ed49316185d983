package blockset

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func setOf(ext ...Extent) *Set {
	s := &Set{}
	for _, e := range ext {
		s.AddRange(e.Start, e.Len)
	}
	return s
}

func TestAddRangeKeepsExtentsCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  []Extent
		want []Extent
	}{
		{"empty", nil, nil},
		{"one", []Extent{{5, 1}}, []Extent{{5, 1}}},
		{"zero length", []Extent{{5, 0}}, nil},
		{"apart", []Extent{{10, 2}, {1, 2}}, []Extent{{1, 2}, {10, 2}}},
		{"touching joins", []Extent{{1, 2}, {3, 2}}, []Extent{{1, 4}}},
		{"touching before joins", []Extent{{3, 2}, {1, 2}}, []Extent{{1, 4}}},
		{"overlap", []Extent{{1, 5}, {4, 5}}, []Extent{{1, 8}}},
		{"inside", []Extent{{1, 10}, {3, 2}}, []Extent{{1, 10}}},
		{"bridges three", []Extent{{1, 1}, {3, 1}, {5, 1}, {7, 1}, {2, 4}}, []Extent{{1, 5}, {7, 1}}},
		{"covers all", []Extent{{3, 1}, {6, 1}, {0, 100}}, []Extent{{0, 100}}},
		{"cut before 2^64-1", []Extent{{math.MaxUint64 - 2, 10}}, []Extent{{math.MaxUint64 - 2, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := setOf(tc.add...).Extents(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	s := setOf(Extent{10, 5}, Extent{30, 1})
	for _, tc := range []struct {
		first, n uint64
		want     bool
	}{
		{0, 10, false}, {0, 11, true}, {14, 1, true}, {15, 15, false},
		{15, 16, true}, {31, 100, false}, {12, 0, false}, {0, math.MaxUint64, true},
	} {
		if got := s.Overlaps(tc.first, tc.n); got != tc.want {
			t.Errorf("Overlaps(%d, %d): got %v, want %v", tc.first, tc.n, got, tc.want)
		}
	}
}

// TestSetAgainstModel runs random adds and merges against a map of blocks.
func TestSetAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var a, b Set
		model := map[uint64]bool{}
		for range rng.IntN(40) {
			first, n := rng.Uint64N(300), rng.Uint64N(8)
			target := &a
			if rng.IntN(2) == 0 {
				target = &b
			}
			target.AddRange(first, n)
			for i := range n {
				model[first+i] = true
			}
		}
		a.Merge(&b)
		if got := a.Blocks(); got != uint64(len(model)) {
			t.Fatalf("round %d: Blocks %d, model holds %d", round, got, len(model))
		}
		for blk := range uint64(320) {
			if a.Has(blk) != model[blk] {
				t.Fatalf("round %d: Has(%d) = %v, model says %v (extents %v)", round, blk, a.Has(blk), model[blk], a.Extents())
			}
		}
		for i, e := range a.Extents() {
			if e.Len == 0 || (i > 0 && a.Extents()[i-1].End() >= e.Start) {
				t.Fatalf("round %d: extents not canonical: %v", round, a.Extents())
			}
		}
	}
}

func TestMergeIntoEmptyAndFromEmpty(t *testing.T) {
	var s Set
	s.Merge(setOf(Extent{4, 4}))
	s.Merge(&Set{})
	if want := setOf(Extent{4, 4}); !s.Equal(want) {
		t.Fatalf("got %v, want %v", s.Extents(), want.Extents())
	}
}
