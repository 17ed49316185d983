package blockstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagelayer"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// writeVersions writes a whole image and depth layers over it into dir,
// each changing a few runs of the one below, and returns the paths (the
// layers top first) and the top version's content.
func writeVersions(t testing.TB, dir string, size, depth int, rng *rand.Rand) (string, []string, []byte) {
	t.Helper()
	flat := make([]byte, size)
	for i := range flat {
		flat[i] = byte(rng.Uint32())
	}
	base := filepath.Join(dir, "base")
	if err := os.WriteFile(base, flat, 0o440); err != nil {
		t.Fatal(err)
	}
	var layers []string
	for d := range depth {
		next := bytes.Clone(flat)
		for range 8 {
			at := rng.IntN(size)
			for j := range min(size-at, 1+rng.IntN(200<<10)) {
				next[at+j] = byte(rng.Uint32())
			}
		}
		sum := sha256.Sum256(flat)
		x, err := imagelayer.Diff(context.Background(), bytes.NewReader(next), bytes.NewReader(flat), int64(size), hex.EncodeToString(sum[:]), imagelayer.DefaultBlockShift)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := imagelayer.Write(context.Background(), &buf, x, bytes.NewReader(next)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "layer"+string(rune('1'+d)))
		if err := os.WriteFile(p, buf.Bytes(), 0o440); err != nil {
			t.Fatal(err)
		}
		layers = append([]string{p}, layers...)
		flat = next
	}
	return base, layers, flat
}

// spanBytes is what a Span hands the client.
func spanBytes(t *testing.T, s nbd.Span, n int) []byte {
	t.Helper()
	if s.File == nil {
		return s.Bytes
	}
	b := make([]byte, n)
	if _, err := s.File.ReadAt(b, s.FileOff); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLayeredReadsLikeFlat: a version three layers deep answers every
// READ path the NBD server uses (ReadNow with and without file spans,
// ReadSpan, ReadAt), alone and under an overlay, with the bytes of the
// flat content.
func TestLayeredReadsLikeFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	base, layers, want := writeVersions(t, dir, 8<<20+512, 3, rng)
	l, err := OpenLayered(base, layers)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetSharers(2)
	if l.Size() != int64(len(want)) || l.Depth() != 3 {
		t.Fatalf("size %d depth %d, want %d and 3", l.Size(), l.Depth(), len(want))
	}
	ov, err := Open(l, filepath.Join(dir, "overlay"), Ephemeral, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ov.Close()
	for i := range 3000 {
		n := 1 + rng.IntN(512<<10)
		if i%3 == 0 {
			n = 64<<10 + rng.IntN(4)*(64<<10) // block-sized reads, the fast paths' case
		}
		off := rng.Int64N(int64(len(want) - n))
		ref := want[off : off+int64(n)]
		for _, d := range []Disk{readOnly{l}, ov} {
			p := make([]byte, n)
			if s, ok := d.ReadNow(p, off, i%2 == 0); ok {
				if !bytes.Equal(spanBytes(t, s, n), ref) {
					t.Fatalf("ReadNow(%d, %d) differs from the flat content", off, n)
				}
			}
			s, err := d.ReadSpan(make([]byte, n), off)
			if err != nil || !bytes.Equal(spanBytes(t, s, n), ref) {
				t.Fatalf("ReadSpan(%d, %d): %v or differs from the flat content", off, n, err)
			}
			if k, err := d.ReadAt(p, off); err != nil || k != n || !bytes.Equal(p, ref) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v or differs", off, n, k, err)
			}
		}
	}
	// A write under the overlay changes the disk, never the version.
	if _, err := ov.WriteAt([]byte("written"), 4096); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 7)
	if _, err := l.ReadAt(p, 4096); err != nil || !bytes.Equal(p, want[4096:4103]) {
		t.Fatalf("the version changed under an overlay write: %q, %v", p, err)
	}
}

func TestOpenLayeredRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	base, layers, _ := writeVersions(t, dir, 1<<20, 1, rand.New(rand.NewPCG(5, 6)))
	b, _ := os.ReadFile(layers[0])
	cut := filepath.Join(dir, "cut")
	if err := os.WriteFile(cut, b[:len(b)-1], 0o440); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLayered(base, []string{cut}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("want")) {
		t.Fatalf("a cut layer: %v, want an error saying the length it wanted", err)
	}
	if _, err := OpenLayered(base, []string{base}); err == nil {
		t.Fatal("a whole image opened as a layer")
	}
}

// BenchmarkRead compares a version three layers deep with the flat
// image of the same content: 4 KiB and 128 KiB reads at random offsets,
// through ReadNow then ReadSpan, as the NBD server answers a READ.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	base, layers, top := writeVersions(b, dir, 256<<20, 3, rand.New(rand.NewPCG(7, 8)))
	flatPath := filepath.Join(dir, "flat")
	if err := os.WriteFile(flatPath, top, 0o440); err != nil {
		b.Fatal(err)
	}
	flat, err := OpenImage(flatPath)
	if err != nil {
		b.Fatal(err)
	}
	defer flat.Close()
	l, err := OpenLayered(base, layers)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, size := range []int{4 << 10, 128 << 10} {
		for _, d := range []struct {
			name string
			disk Disk
		}{{"flat", readOnly{flat}}, {"layered3", readOnly{l}}} {
			b.Run(fmt.Sprintf("%s/%dk", d.name, size>>10), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				p := make([]byte, size)
				b.SetBytes(int64(size))
				for b.Loop() {
					off := rng.Int64N(int64(len(top)-size)) &^ 4095
					if _, ok := d.disk.ReadNow(p, off, false); ok {
						continue
					}
					if _, err := d.disk.ReadSpan(p, off); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
