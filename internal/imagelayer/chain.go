package imagelayer

import (
	"fmt"
	"io"
)

// Layer is an open layer: its index and the file holding its blocks.
type Layer struct {
	*Index
	File io.ReaderAt
}

// Chain reads a version through its layers down to a flat base: a block
// comes from the topmost layer holding it, else from the base. It is safe
// for concurrent use when its files are.
type Chain struct {
	layers []Layer // top first
	base   io.ReaderAt
	size   int64
	shift  uint32
}

// NewChain builds the chain of layers, top first, over base. Each layer
// must be the parent of the one above it in size and block size; the
// caller checks the parents' hashes, which it knows.
func NewChain(base io.ReaderAt, size int64, layers ...Layer) (*Chain, error) {
	if len(layers) == 0 {
		return nil, fmt.Errorf("imagelayer: a chain needs at least one layer")
	}
	c := &Chain{layers: layers, base: base, size: size, shift: layers[0].BlockShift}
	for i, l := range layers {
		if l.Size != size || l.BlockShift != c.shift {
			return nil, fmt.Errorf("%w: layer %d of the chain is %d bytes in blocks of %d, want %d bytes in blocks of %d",
				ErrFormat, i, l.Size, l.BlockSize(), size, int64(1)<<c.shift)
		}
	}
	return c, nil
}

// Size is the version's size in bytes.
func (c *Chain) Size() int64 { return c.size }

// Depth is the number of layers.
func (c *Chain) Depth() int { return len(c.layers) }

// source is where block i reads from: a layer's index and the block's
// offset in its file, or -1 and the block's offset in the base.
func (c *Chain) source(i int64) (int, int64) {
	for k, l := range c.layers {
		if off, ok := l.Offset(i); ok {
			return k, off
		}
	}
	return -1, i << c.shift
}

// Span says where [off, off+n) is when it lies in one file, contiguous:
// layer k (-1 for the base) at file offset at. A range split across
// sources is not one span.
func (c *Chain) Span(off, n int64) (k int, at int64, ok bool) {
	if off < 0 || n <= 0 || off > c.size || n > c.size-off {
		return 0, 0, false
	}
	first, last := off>>c.shift, (off+n-1)>>c.shift
	k, start := c.source(first)
	for i := first + 1; i <= last; i++ {
		if kk, o := c.source(i); kk != k || o != start+(i-first)<<c.shift {
			return 0, 0, false
		}
	}
	return k, start + off - first<<c.shift, true
}

// ReadAt reads through the layers, one read per run of blocks that lie
// together in one file. It returns io.EOF for a read past the end.
func (c *Chain) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("imagelayer: read at negative offset %d", off)
	}
	if off >= c.size {
		return 0, io.EOF
	}
	want := len(p)
	if rest := c.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	bs := int64(1) << c.shift
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		i := pos >> c.shift
		k, at := c.source(i)
		at += pos - i<<c.shift
		end := min((i+1)<<c.shift, off+int64(len(p))) // this block's part
		for next := i + 1; end < off+int64(len(p)); next++ {
			kk, o := c.source(next)
			if kk != k || o != at+(next<<c.shift-pos) {
				break
			}
			end = min(end+bs, off+int64(len(p)))
		}
		n := int(end - pos)
		var err error
		if k < 0 {
			_, err = c.base.ReadAt(p[done:done+n], at)
		} else {
			_, err = c.layers[k].File.ReadAt(p[done:done+n], at)
		}
		if err != nil && err != io.EOF {
			return done, err
		}
		if err == io.EOF { // a short file: corrupt, never a hole
			return done, fmt.Errorf("%w: file of source %d ends before offset %d", ErrFormat, k, at+int64(n))
		}
		done += n
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}
