package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestSparseWriter: whatever the chunking, the file holds the stream, and
// the blocks of zeros are holes.
func TestSparseWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	stream := make([]byte, 1<<20+777) // ends in a partial block
	for b := 0; b < len(stream)/blockSize; b++ {
		if b%4 == 1 { // a quarter of the blocks hold data
			for i := b * blockSize; i < (b+1)*blockSize; i++ {
				stream[i] = byte(rng.Uint32())
			}
		}
	}
	stream[len(stream)-1] = 1
	trailingZeros := append(bytes.Clone(stream[:3*blockSize]), make([]byte, 10*blockSize+5)...)
	const slack = 16 * blockSize // for the file system's own blocks (ext4's extent tree)
	tests := []struct {
		name     string
		stream   []byte
		chunk    int
		maxAlloc int64 // the data blocks and slack; writing the zeros takes 4 times that
	}{
		{"one byte at a time", stream[:64*blockSize+3], 1, 16*blockSize + slack},
		{"odd chunks", stream, 4097, int64(len(stream))/4 + blockSize + slack},
		{"block chunks", stream, blockSize, int64(len(stream))/4 + blockSize + slack},
		{"one write", stream, len(stream), int64(len(stream))/4 + blockSize + slack},
		{"trailing zeros", trailingZeros, 1000, 3*blockSize + slack},
		{"all zeros", make([]byte, 100*blockSize), 3000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "img"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := newSparseWriter(f)
			for p := tt.stream; len(p) > 0; {
				n := min(tt.chunk, len(p))
				if k, err := w.Write(p[:n]); k != n || err != nil {
					t.Fatalf("Write: %d, %v", k, err)
				}
				p = p[n:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil || !bytes.Equal(got, tt.stream) {
				t.Fatalf("file differs from the stream (%d bytes, want %d; %v)", len(got), len(tt.stream), err)
			}
			st, _ := f.Stat()
			if a := allocated(st); a > tt.maxAlloc {
				t.Fatalf("file takes %d bytes on disk, want at most %d: zero blocks were written", a, tt.maxAlloc)
			}
			sum, err := hashFile(context.Background(), f.Name())
			if want := sha256.Sum256(tt.stream); err != nil || sum != hex.EncodeToString(want[:]) {
				t.Fatalf("hashFile: %s, %v; want %x", sum, err, want)
			}
		})
	}
}
