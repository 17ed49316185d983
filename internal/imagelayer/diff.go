package imagelayer

import (
	"bytes"
	"context"
	"fmt"
	"io"
)

// Diff compares content with its parent, both size bytes, block by block
// and returns the index of a layer holding the blocks that differ.
func Diff(ctx context.Context, content, parent io.ReaderAt, size int64, parentSHA string, shift uint32) (*Index, error) {
	h := Header{BlockShift: shift, Size: size, Parent: parentSHA}
	if err := h.check(); err != nil {
		return nil, err
	}
	bs := h.BlockSize()
	bm := make([]byte, h.BitmapLen())
	a, b := make([]byte, bs), make([]byte, bs)
	for i := int64(0); i < h.Blocks(); i++ {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		n := min(bs, size-i*bs)
		if err := readFull(content, a[:n], i*bs); err != nil {
			return nil, fmt.Errorf("imagelayer: read the new content: %w", err)
		}
		if err := readFull(parent, b[:n], i*bs); err != nil {
			return nil, fmt.Errorf("imagelayer: read the parent: %w", err)
		}
		if !bytes.Equal(a[:n], b[:n]) {
			bm[i/8] |= 1 << (i % 8)
			h.Count++
		}
	}
	return newIndex(h, bm)
}

// Write writes the layer x describes, its blocks read from content.
func Write(ctx context.Context, w io.Writer, x *Index, content io.ReaderAt) error {
	head, err := AppendHeader(make([]byte, 0, x.DataOffset()), x.Header)
	if err != nil {
		return err
	}
	head = append(head, x.Bitmap()...)
	head = append(head, make([]byte, x.DataOffset()-int64(len(head)))...)
	if _, err := w.Write(head); err != nil {
		return fmt.Errorf("imagelayer: write the header: %w", err)
	}
	bs := x.BlockSize()
	buf := make([]byte, bs)
	for i := int64(0); i < x.Blocks(); i++ {
		if !x.Has(i) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(bs, x.Size-i*bs)
		clear(buf[n:])
		if err := readFull(content, buf[:n], i*bs); err != nil {
			return fmt.Errorf("imagelayer: read the new content: %w", err)
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("imagelayer: write block %d: %w", i, err)
		}
	}
	return nil
}

// readFull fills p from r at off; a short read is an error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
