package dhcplb

import (
	"math/rand/v2"
	"testing"
)

func TestMixTableIsAPermutation(t *testing.T) {
	var seen [Buckets]bool
	for i, v := range mixTable {
		if seen[v] {
			t.Fatalf("mixTable[%d] = %d appears twice; the table must hold every byte once (RFC 3074 section 6)", i, v)
		}
		seen[v] = true
	}
}

func TestBucket(t *testing.T) {
	tests := []struct {
		name string
		hw   []byte
		want uint8
	}{
		// By hand from the table: seed 1, then T[1^0] = T[1].
		{"one zero byte", []byte{0}, 175},
		// Seed 1, T[1^1] = T[0].
		{"one byte 1", []byte{1}, 251},
		// Seed 2; the last byte first: T[2^2] = T[0] = 251, then T[251^0] = T[251].
		{"last byte first", []byte{0, 2}, 68},
		// The other order: T[2^0] = T[2] = 119, then T[119^2] = T[117].
		{"other order", []byte{2, 0}, 26},
		// Seed 0, no byte.
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Bucket(tt.hw); got != tt.want {
				t.Fatalf("Bucket(% x) = %d, want %d", tt.hw, got, tt.want)
			}
		})
	}
}

// TestBucketSpread: the MACs of a lab, one OUI and a counter, fill the
// buckets evenly enough that three servers each get about a third.
func TestBucketSpread(t *testing.T) {
	var n [Buckets]int
	const macs = 25600
	r := rand.New(rand.NewPCG(1, 2))
	for i := range macs {
		hw := []byte{0x52, 0x54, 0x00, byte(r.IntN(256)), byte(i >> 8), byte(i)}
		n[Bucket(hw)]++
	}
	for b, c := range n {
		if c < macs/Buckets/2 || c > macs/Buckets*2 {
			t.Fatalf("bucket %d holds %d of %d MACs, want about %d", b, c, macs, macs/Buckets)
		}
	}
}
