package readorder

import (
	"errors"
	"slices"
	"testing"
)

func TestCodec(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []uint32
		size  int // bytes of the file
	}{
		{"empty", nil, 6},
		{"sequential", []uint32{0, 1, 2, 3, 4}, 6 + 5},
		{"backwards", []uint32{900, 10, 11, 5}, 6 + 2 + 2 + 1 + 1},
		{"extremes", []uint32{1<<32 - 1, 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Encode(tc.order)
			if tc.size != 0 && len(b) != tc.size {
				t.Errorf("Encode(%v) is %d bytes, want %d", tc.order, len(b), tc.size)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode(Encode(%v)): %v", tc.order, err)
			}
			if !slices.Equal(got, tc.order) {
				t.Errorf("Decode(Encode(%v)) = %v", tc.order, got)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Encode([]uint32{3, 4, 9})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nothing", nil, ErrMagic},
		{"other magic", []byte("BFRO\x02\x00"), ErrMagic},
		{"no count", []byte(magic), ErrMalformed},
		{"cut short", good[:len(good)-1], ErrMalformed},
		{"trailing", append(slices.Clone(good), 0), ErrMalformed},
		{"duplicate", append([]byte(magic), 2, 6, 1), ErrMalformed}, // 3, then 3-... : 3 and 3
		{"count too large", append([]byte(magic), 0xff, 0xff, 0xff, 0x7f), ErrMalformed},
		{"below zero", append([]byte(magic), 1, 3), ErrMalformed}, // -2 +1 -1
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := Decode(tc.b); !errors.Is(err, tc.want) {
				t.Errorf("Decode(%q) = %v, %v; want %v", tc.b, got, err, tc.want)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, and that what it accepts
// encodes back to the same bytes (one encoding per order).
func FuzzDecode(f *testing.F) {
	f.Add(Encode([]uint32{0, 1, 2, 40, 7}))
	f.Fuzz(func(t *testing.T, b []byte) {
		order, err := Decode(b)
		if err != nil {
			return
		}
		if again := Encode(order); !slices.Equal(again, b) {
			// Varints have one shortest form; a longer one decodes too.
			if o2, err := Decode(again); err != nil || !slices.Equal(o2, order) {
				t.Fatalf("Decode(%x) = %v, which encodes to %x and decodes to %v, %v", b, order, again, o2, err)
			}
		}
	})
}
