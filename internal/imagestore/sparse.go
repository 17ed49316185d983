package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
)

// blockSize is the unit of sparseness: an aligned block of this many zero
// bytes is left as a hole rather than written. 4 KiB is the block size of
// the file systems a data directory lives on (ext4, XFS, tmpfs), so a
// smaller unit would save no space.
const blockSize = 4096

var zeros [1 << 20]byte

func isZero(b []byte) bool { return bytes.Equal(b, zeros[:len(b)]) }

// sparseWriter writes a stream into a new, empty file, leaving the
// aligned blocks of zeros as holes. Close sets the file's size, so trailing
// zeros become a hole too.
type sparseWriter struct {
	f    *os.File
	off  int64  // where pend starts: the bytes before are written or skipped
	pend []byte // the start of a block not yet complete
}

func newSparseWriter(f *os.File) *sparseWriter {
	return &sparseWriter{f: f, pend: make([]byte, 0, blockSize)}
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.pend) > 0 {
		k := min(blockSize-len(w.pend), len(p))
		w.pend, p = append(w.pend, p[:k]...), p[k:]
		if len(w.pend) < blockSize {
			return n, nil
		}
		if err := w.put(w.pend); err != nil {
			return 0, err
		}
		w.pend = w.pend[:0]
	}
	whole := len(p) &^ (blockSize - 1)
	if err := w.put(p[:whole]); err != nil {
		return 0, err
	}
	w.pend = append(w.pend, p[whole:]...)
	return n, nil
}

// put writes b at w.off, one WriteAt per run of blocks holding data.
func (w *sparseWriter) put(b []byte) error {
	run := func(zero bool) int {
		i := 0
		for i < len(b) && isZero(b[i:min(i+blockSize, len(b))]) == zero {
			i += blockSize
		}
		return min(i, len(b))
	}
	for len(b) > 0 {
		skip := run(true)
		w.off, b = w.off+int64(skip), b[skip:]
		data := run(false)
		if data == 0 {
			continue
		}
		if _, err := w.f.WriteAt(b[:data], w.off); err != nil {
			return err
		}
		w.off, b = w.off+int64(data), b[data:]
	}
	return nil
}

// Close writes the last partial block and sets the file's size; it does
// not close the file.
func (w *sparseWriter) Close() error {
	if err := w.put(w.pend); err != nil {
		return err
	}
	w.pend = w.pend[:0]
	return w.f.Truncate(w.off)
}

// hashFile returns the hex sha256 of the file at path. The holes are not
// read: they are hashed as the zeros they read as, so a sparse 20 GiB
// image costs only the hashing, not a read of 20 GiB through the page
// cache.
func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if err := hashInto(ctx, h, f, st.Size()); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashInto writes the first size bytes of f into h, holes as zeros
// without reading them.
func hashInto(ctx context.Context, h hash.Hash, f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		data, hole := nextData(f, off, size)
		for off < data {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(data-off, int64(len(zeros)))
			h.Write(zeros[:n])
			off += n
		}
		for off < hole {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := f.ReadAt(buf[:min(hole-off, int64(len(buf)))], off)
			h.Write(buf[:n])
			off += int64(n)
			if err != nil && (err != io.EOF || off < hole) {
				return fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
			}
		}
	}
	return nil
}
