package blockset

import (
	"cmp"
	"errors"
	"github.com/bootfleet/bootfleet/internal/testutil"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range []*Set{
		{},
		setOf(Extent{0, 1}),
		setOf(Extent{math.MaxUint64 - 5, 4}),
		setOf(Extent{3, 1}, Extent{5, 1}, Extent{7, 1}), // bitmap form wins
		setOf(Extent{1 << 40, 1 << 20}, Extent{1<<40 + 1<<21, 9}),
	} {
		b := s.Append(nil, 16)
		got, shift, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Append(%v)): %v", s.Extents(), err)
		}
		if shift != 16 || !got.Equal(s) {
			t.Fatalf("round trip of %v: got %v shift %d", s.Extents(), got.Extents(), shift)
		}
	}
}

func TestAppendChoosesTheSmallerForm(t *testing.T) {
	every2nd := &Set{}
	for b := uint64(0); b < 1000; b += 2 {
		every2nd.Add(b)
	}
	if b := every2nd.Append(nil, 12); b[2] != formBitmap || len(b) > HeaderLen+4+125 {
		t.Fatalf("every second block of 1000: form %d, %d bytes, want the bitmap form in at most %d", b[2], len(b), HeaderLen+4+125)
	}
	if b := setOf(Extent{0, 1000}).Append(nil, 12); b[2] != formExtents || len(b) != HeaderLen+4 {
		t.Fatalf("one extent: form %d, %d bytes, want the extent form in %d", b[2], len(b), HeaderLen+4)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"version", []byte{2, 12, 0, 0, 0}, ErrVersion},
		{"shift small", []byte{1, 8, 0, 0, 0}, ErrMalformed},
		{"shift large", []byte{1, 31, 0, 0, 0}, ErrMalformed},
		{"form", []byte{1, 12, 2, 0, 0}, ErrVersion},
		{"reserved", []byte{1, 12, 0, 1, 0}, ErrMalformed},
		{"no count", []byte{1, 12, 0, 0}, ErrShort},
		{"count past bytes", []byte{1, 12, 0, 0, 5, 1, 1}, ErrShort},
		{"cut extent", []byte{1, 12, 0, 0, 1, 0x80}, ErrShort},
		{"trailing", []byte{1, 12, 0, 0, 1, 1, 1, 0}, ErrMalformed},
		{"non-minimal varint", []byte{1, 12, 0, 0, 1, 0x81, 0x00, 1}, ErrMalformed},
		{"extent past 2^64", append([]byte{1, 12, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 1), ErrMalformed},
		{"gap past 2^64", append([]byte{1, 12, 0, 0, 2, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0), ErrMalformed},
		{"bitmap empty", []byte{1, 12, 1, 0, 0, 0}, ErrMalformed},
		{"bitmap short", []byte{1, 12, 1, 0, 0, 9, 0x01}, ErrMalformed},
		{"bitmap first bit clear", []byte{1, 12, 1, 0, 0, 3, 0x06}, ErrMalformed},
		{"bitmap last bit clear", []byte{1, 12, 1, 0, 0, 3, 0x03}, ErrMalformed},
		{"bitmap pad bits", []byte{1, 12, 1, 0, 0, 3, 0x0d}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Parse(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%x): got %v, want %v", tc.b, err, tc.want)
			}
		})
	}
}

// TestEncodedSizeOfLargeSparseOverlays measures the encoding of 20 GiB
// overlays: scattered small writes, one large file, and the worst case of
// every other block written. A plain bitmap of the whole disk is the
// bound the encoding must never exceed, and scattered writes must cost a
// few bytes each.
func TestEncodedSizeOfLargeSparseOverlays(t *testing.T) {
	const disk = 20 << 30
	rng := rand.New(rand.NewPCG(30, 31))
	// The server walks its allocation map in block order, so the writes
	// are added sorted, as it would.
	scattered := func(blockShift uint8, writes int, maxLen uint64) *Set {
		ext := make([]Extent, writes)
		blocks := uint64(disk >> blockShift)
		for i := range ext {
			ext[i] = Extent{rng.Uint64N(blocks), 1 + rng.Uint64N(maxLen)}
		}
		slices.SortFunc(ext, func(a, b Extent) int { return cmp.Compare(a.Start, b.Start) })
		return setOf(ext...)
	}
	alternate := &Set{}
	for b := uint64(0); b < (1<<30)>>12; b += 2 {
		alternate.Add(b)
	}
	for _, tc := range []struct {
		name        string
		shift       uint8
		set         *Set
		maxPerRange float64 // bytes per extent, 0: not checked
	}{
		{"64 KiB blocks, 2000 writes of 1-4 blocks", 16, scattered(16, 2000, 4), 4},
		{"4 KiB blocks, 20000 writes of 1-16 blocks", 12, scattered(12, 20000, 16), 4},
		{"4 KiB blocks, 200000 writes of 1-16 blocks", 12, scattered(12, 200000, 16), 4},
		{"4 KiB blocks, one 2 GiB file", 12, setOf(Extent{123456, (2 << 30) >> 12}), 0},
		{"4 KiB blocks, every other block of 1 GiB", 12, alternate, 0},
	} {
		b := tc.set.Append(nil, tc.shift)
		bitmap := disk >> tc.shift / 8
		perRange := float64(len(b)) / float64(max(1, len(tc.set.Extents())))
		t.Logf("%-45s %7d extents %8d bytes (%.2f a extent), bitmap of the disk %7d bytes, form %d",
			tc.name, len(tc.set.Extents()), len(b), perRange, bitmap, b[2])
		if len(b) > bitmap+HeaderLen+16 {
			t.Errorf("%s: %d bytes, more than a bitmap of the whole disk (%d)", tc.name, len(b), bitmap)
		}
		if tc.maxPerRange > 0 && perRange > tc.maxPerRange {
			t.Errorf("%s: %.2f bytes a extent, want at most %.0f", tc.name, perRange, tc.maxPerRange)
		}
		if got, _, err := Parse(b); err != nil || !got.Equal(tc.set) {
			t.Errorf("%s: does not read back: %v", tc.name, err)
		}
	}
}

// FuzzParse: any bytes either decode into a canonical set that survives
// its own encoding, or are refused. The seeds are in testdata/fuzz/FuzzParse,
// written by UPDATE_TESTDATA=1 go test -run TestWriteSeeds.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		s, shift, err := Parse(b)
		if err != nil {
			return
		}
		for i, e := range s.Extents() {
			if e.Len == 0 || e.End() < e.Start || (i > 0 && s.Extents()[i-1].End() >= e.Start) {
				t.Fatalf("Parse(%x) gave extents that are not canonical: %v", b, s.Extents())
			}
		}
		back, shift2, err := Parse(s.Append(nil, shift))
		if err != nil || shift2 != shift || !back.Equal(s) {
			t.Fatalf("set %v does not survive its encoding: %v %v", s.Extents(), back, err)
		}
	})
}

func TestWriteSeeds(t *testing.T) {
	every3rd := &Set{}
	for b := uint64(100); b < 400; b += 3 {
		every3rd.Add(b)
	}
	seeds := map[string][]byte{
		"empty":      (&Set{}).Append(nil, 16),
		"scattered":  setOf(Extent{7, 1}, Extent{900, 30}, Extent{1 << 30, 2}).Append(nil, 12),
		"bitmap":     every3rd.Append(nil, 12),
		"top-blocks": setOf(Extent{math.MaxUint64 - 9, 8}).Append(nil, 30),
	}
	testutil.FuzzSeeds(t, "FuzzParse", seeds)
}
