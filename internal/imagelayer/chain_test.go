package imagelayer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// version is one content of a chain, flat, with the layer that stores
// it over the content below.
type version struct {
	flat  []byte
	layer []byte
}

// build makes a chain of depth layers over base: each version changes
// the blocks edits picks from the one below, by writing a byte into
// them. It returns the chain and every version's flat content.
func build(t testing.TB, base []byte, depth int, shift uint32, rng *rand.Rand) (*Chain, []version) {
	t.Helper()
	ctx := context.Background()
	below := bytes.NewReader(base)
	flat := base
	var vs []version
	var layers []Layer
	for range depth {
		next := bytes.Clone(flat)
		for range 1 + rng.IntN(6) {
			if len(next) > 0 {
				at := rng.IntN(len(next))
				run := min(len(next)-at, 1+rng.IntN(3<<shift))
				for j := range run {
					next[at+j] ^= byte(1 + rng.IntN(255))
				}
			}
		}
		sum := sha256.Sum256(flat)
		x, err := Diff(ctx, bytes.NewReader(next), below, int64(len(next)), hex.EncodeToString(sum[:]), shift)
		if err != nil {
			t.Fatal(err)
		}
		var file bytes.Buffer
		if err := Write(ctx, &file, x, bytes.NewReader(next)); err != nil {
			t.Fatal(err)
		}
		if int64(file.Len()) != x.FileSize() {
			t.Fatalf("layer file of %d bytes, header says %d", file.Len(), x.FileSize())
		}
		back, err := ParseIndex(file.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		layers = append([]Layer{{Index: back, File: bytes.NewReader(file.Bytes())}}, layers...)
		vs = append(vs, version{flat: next, layer: file.Bytes()})
		flat, below = next, bytes.NewReader(next)
	}
	c, err := NewChain(bytes.NewReader(base), int64(len(base)), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return c, vs
}

// compare reads the chain at off for n bytes and checks it against want.
func compare(t testing.TB, c *Chain, want []byte, off, n int64) {
	t.Helper()
	p := make([]byte, n)
	got, err := c.ReadAt(p, off)
	end := min(off+n, int64(len(want)))
	if off >= int64(len(want)) {
		if got != 0 || err != io.EOF {
			t.Fatalf("ReadAt(%d, %d) past the end = %d, %v; want 0, EOF", off, n, got, err)
		}
		return
	}
	if int64(got) != end-off || !bytes.Equal(p[:got], want[off:end]) {
		t.Fatalf("ReadAt(%d, %d) = %d bytes, %v; differs from the flat reference", off, n, got, err)
	}
	if end < off+n && err != io.EOF {
		t.Fatalf("ReadAt(%d, %d) runs past the end: err %v, want EOF", off, n, err)
	}
	if end == off+n && err != nil {
		t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
	}
}

// TestChainReadsLikeFlat: a chain three deep reads as the flat content
// of its top version, and each layer holds only the changed blocks.
func TestChainReadsLikeFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]byte, 1<<20+1000) // not a whole number of blocks
	for i := range base {
		base[i] = byte(i * 7)
	}
	c, vs := build(t, base, 3, 12, rng)
	top := vs[len(vs)-1].flat
	for _, v := range vs {
		if len(v.layer) > len(base)/4 {
			t.Fatalf("a layer of a few changed runs takes %d bytes of a %d byte image", len(v.layer), len(base))
		}
	}
	for range 2000 {
		off := rng.Int64N(int64(len(top)) + 5000)
		compare(t, c, top, off, 1+rng.Int64N(300<<10))
	}
	compare(t, c, top, 0, int64(len(top)))
}

// FuzzChain checks reads through layers against the flat reference for
// any content, change pattern, depth and read.
func FuzzChain(f *testing.F) {
	f.Add(uint64(1), uint16(5000), uint8(3), int64(0), int64(4096))
	f.Add(uint64(7), uint16(4096), uint8(1), int64(4095), int64(2))
	f.Add(uint64(9), uint16(1), uint8(5), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, seed uint64, size uint16, depth uint8, off, n int64) {
		if size == 0 || depth == 0 || depth > 6 || off < 0 || n <= 0 || n > 1<<17 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		base := make([]byte, int(size)*3)
		for i := range base {
			base[i] = byte(rng.Uint32())
		}
		c, vs := build(t, base, int(depth), 12, rng)
		compare(t, c, vs[len(vs)-1].flat, off%(int64(len(base))+4096), n)
	})
}

// FuzzParseIndex: any bytes either parse into an index that answers
// every block without panicking, or fail with ErrFormat.
func FuzzParseIndex(f *testing.F) {
	var file bytes.Buffer
	x, _ := Diff(context.Background(), bytes.NewReader(make([]byte, 9000)), bytes.NewReader(make([]byte, 9000)), 9000, hex.EncodeToString(make([]byte, 32)), 12)
	Write(context.Background(), &file, x, bytes.NewReader(make([]byte, 9000)))
	f.Add(file.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseIndex(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("ParseIndex: %v, want ErrFormat", err)
			}
			return
		}
		held := int64(0)
		for i := int64(-1); i <= min(x.Blocks(), 1<<16); i++ {
			if off, ok := x.Offset(i); ok {
				if off < x.DataOffset() || off+x.BlockSize() > x.FileSize() {
					t.Fatalf("block %d at %d, outside the data of %d..%d", i, off, x.DataOffset(), x.FileSize())
				}
				held++
			}
		}
		if x.Blocks() <= 1<<16 && held != x.Count {
			t.Fatalf("%d blocks found, header says %d", held, x.Count)
		}
		again, err := AppendHeader(nil, x.Header)
		if err != nil || !bytes.Equal(again, b[:HeaderSize]) {
			t.Fatalf("header does not round-trip: %v", err)
		}
	})
}

// TestParseErrors: each malformed header says what it wanted.
func TestParseErrors(t *testing.T) {
	good, _ := AppendHeader(nil, Header{BlockShift: 12, Size: 8192, Parent: hex.EncodeToString(make([]byte, 32)), Count: 1})
	good = append(good, 0b01)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		say  string
	}{
		{"short", func(b []byte) []byte { return b[:10] }, "want a header"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "magic"},
		{"shift", func(b []byte) []byte { b[11] = 40; return b }, "block shift 40"},
		{"reserved", func(b []byte) []byte { b[15] = 1; return b }, "reserved"},
		{"size", func(b []byte) []byte { clear(b[16:24]); return b }, "size 0"},
		{"count", func(b []byte) []byte { b[63] = 3; return b }, "3 blocks stored"},
		{"bitmap count", func(b []byte) []byte { b[64] = 0b11; return b }, "bitmap marks 2 blocks"},
		{"bitmap past size", func(b []byte) []byte { b[64] = 0b101; b[63] = 2; return b }, "past the 2"},
		{"no bitmap", func(b []byte) []byte { return b[:64] }, "bitmap of 1"},
	} {
		_, err := ParseIndex(tc.edit(bytes.Clone(good)))
		if !errors.Is(err, ErrFormat) || !bytes.Contains([]byte(err.Error()), []byte(tc.say)) {
			t.Errorf("%s: %v, want ErrFormat saying %q", tc.name, err, tc.say)
		}
	}
	if _, err := ParseIndex(good); err != nil {
		t.Fatal(err)
	}
}
