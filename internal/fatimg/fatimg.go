package fatimg

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// File is one file of an image. Path is slash-separated and relative to
// the root ("EFI/BOOT/BOOTAA64.EFI"); directories are made as needed.
// Content must yield exactly Size bytes.
type File struct {
	Path    string
	Size    int64
	Content io.Reader
}

const (
	sectorSize  = 512
	rootEntries = 512
	reserved    = 1
	numFATs     = 2
	entrySize   = 32
	// FAT16 is defined by its cluster count alone: fewer than 4085 is
	// FAT12 and more than 65524 is FAT32, whatever the boot sector says.
	minClusters = 4085
	maxClusters = 65524
)

// ErrTooLarge is returned when the files do not fit FAT16 with its
// largest clusters (64 sectors, 32 KiB), about 2 GiB.
var ErrTooLarge = errors.New("fatimg: files too large for a FAT16 image (at most about 2 GiB)")

// node is a file or directory of the tree being written.
type node struct {
	name     string // long name as given
	short    [11]byte
	dir      bool
	size     int64 // bytes; for directories, computed from entries
	content  io.Reader
	children []*node
	parent   *node
	cluster  uint32 // first cluster; 0 for the root and empty files
	clusters uint32
}

// layout is a planned image.
type layout struct {
	root         *node
	order        []*node // data region order: directories, then files
	spc          uint32  // sectors per cluster
	clusters     uint32  // data clusters, padded to minClusters
	fatSectors   uint32
	totalSectors uint32
}

// Size is the size in bytes of the image Write makes of files.
func Size(files []File) (int64, error) {
	l, err := plan(files)
	if err != nil {
		return 0, err
	}
	return int64(l.totalSectors) * sectorSize, nil
}

// Write writes a FAT16 image of files to w and returns its size.
func Write(w io.Writer, files []File) (int64, error) {
	l, err := plan(files)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	if err := l.write(cw); err != nil {
		return cw.n, err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	if want := int64(l.totalSectors) * sectorSize; cw.n != want {
		return cw.n, fmt.Errorf("fatimg: wrote %d bytes, planned %d", cw.n, want)
	}
	return cw.n, nil
}

func plan(files []File) (*layout, error) {
	root := &node{dir: true}
	for _, f := range files {
		if err := add(root, f); err != nil {
			return nil, err
		}
	}
	var dirs, regular []*node
	var walk func(*node) error
	walk = func(d *node) error {
		sort.Slice(d.children, func(i, j int) bool { return d.children[i].name < d.children[j].name })
		if err := shortNames(d); err != nil {
			return err
		}
		n := 0
		for _, c := range d.children {
			n += 1 + lfnCount(c)
		}
		if d == root {
			if n > rootEntries {
				return fmt.Errorf("fatimg: the root directory needs %d entries, FAT16 holds %d; put files in subdirectories", n, rootEntries)
			}
		} else {
			d.size = int64(n+2) * entrySize // with "." and ".."
			dirs = append(dirs, d)
		}
		for _, c := range d.children {
			if c.dir {
				if err := walk(c); err != nil {
					return err
				}
			} else {
				regular = append(regular, c)
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	l := &layout{root: root, order: append(dirs, regular...)}
	for spc := uint32(1); spc <= 64; spc *= 2 {
		need := uint64(0)
		for _, n := range l.order {
			need += clustersFor(n.size, spc)
		}
		if need <= maxClusters {
			l.spc, l.clusters = spc, uint32(max(need, minClusters))
			break
		}
	}
	if l.spc == 0 {
		return nil, ErrTooLarge
	}
	next := uint32(2)
	for _, n := range l.order {
		n.clusters = uint32(clustersFor(n.size, l.spc))
		if n.clusters > 0 {
			n.cluster = next
			next += n.clusters
		}
	}
	l.fatSectors = ceilDiv((l.clusters+2)*2, sectorSize)
	l.totalSectors = reserved + numFATs*l.fatSectors + rootEntries*entrySize/sectorSize + l.clusters*l.spc
	return l, nil
}

// add puts f into the tree under root, making its directories.
func add(root *node, f File) error {
	clean := path.Clean(strings.TrimPrefix(f.Path, "/"))
	if f.Path == "" || clean == "." || strings.HasPrefix(clean, "..") {
		return fmt.Errorf("fatimg: file path %q: want a path inside the image such as EFI/BOOT/BOOTAA64.EFI", f.Path)
	}
	if f.Size < 0 || f.Size > 0xFFFFFFFF {
		return fmt.Errorf("fatimg: %s: size %d, want 0 to 4 GiB-1 (FAT's limit)", f.Path, f.Size)
	}
	parts := strings.Split(clean, "/")
	d := root
	for i, p := range parts {
		if err := validName(p); err != nil {
			return fmt.Errorf("fatimg: %s: %w", f.Path, err)
		}
		last := i == len(parts)-1
		var found *node
		for _, c := range d.children {
			if strings.EqualFold(c.name, p) {
				found = c
			}
		}
		switch {
		case found != nil && (last || !found.dir):
			return fmt.Errorf("fatimg: %s: %q is already in the image (FAT names ignore case)", f.Path, path.Join(parts[:i+1]...))
		case found != nil:
			d = found
		case last:
			d.children = append(d.children, &node{name: p, size: f.Size, content: f.Content, parent: d})
		default:
			nd := &node{name: p, dir: true, parent: d}
			d.children = append(d.children, nd)
			d = nd
		}
	}
	return nil
}

func clustersFor(size int64, spc uint32) uint64 {
	b := uint64(spc) * sectorSize
	return (uint64(size) + b - 1) / b
}

func ceilDiv(a, b uint32) uint32 { return (a + b - 1) / b }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (l *layout) write(w io.Writer) error {
	if _, err := w.Write(l.bootSector()); err != nil {
		return err
	}
	fat := l.fat()
	for range numFATs {
		if _, err := w.Write(fat); err != nil {
			return err
		}
	}
	if _, err := w.Write(l.dirEntries(l.root, rootEntries*entrySize)); err != nil {
		return err
	}
	clusterBytes := int64(l.spc) * sectorSize
	used := int64(0)
	for _, n := range l.order {
		span := int64(n.clusters) * clusterBytes
		if n.dir {
			if _, err := w.Write(l.dirEntries(n, int(span))); err != nil {
				return err
			}
		} else {
			got, err := io.CopyN(w, n.content, n.size)
			if err != nil {
				return fmt.Errorf("fatimg: %s: read %d of its %d bytes: %w", pathOf(n), got, n.size, err)
			}
			if err := zeros(w, span-n.size); err != nil {
				return err
			}
		}
		used += span
	}
	return zeros(w, int64(l.clusters)*clusterBytes-used)
}

func pathOf(n *node) string {
	if n.parent == nil {
		return ""
	}
	return path.Join(pathOf(n.parent), n.name)
}

func zeros(w io.Writer, n int64) error {
	_, err := io.CopyN(w, zeroReader{}, n)
	return err
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// bootSector is the BPB of a FAT16 volume with no boot code.
func (l *layout) bootSector() []byte {
	b := make([]byte, sectorSize*reserved)
	copy(b, []byte{0xEB, 0x3C, 0x90})
	copy(b[3:], "BOOTFLT ")
	le := binary.LittleEndian
	le.PutUint16(b[11:], sectorSize)
	b[13] = byte(l.spc)
	le.PutUint16(b[14:], reserved)
	b[16] = numFATs
	le.PutUint16(b[17:], rootEntries)
	if l.totalSectors < 0x10000 {
		le.PutUint16(b[19:], uint16(l.totalSectors))
	} else {
		le.PutUint32(b[32:], l.totalSectors)
	}
	b[21] = 0xF8 // fixed media
	le.PutUint16(b[22:], uint16(l.fatSectors))
	le.PutUint16(b[24:], 32) // sectors per track, heads: unused by UEFI
	le.PutUint16(b[26:], 64)
	b[36] = 0x80
	b[38] = 0x29
	le.PutUint32(b[39:], 0x2020B007)
	copy(b[43:], "NO NAME    ")
	copy(b[54:], "FAT16   ")
	b[510], b[511] = 0x55, 0xAA
	return b
}

// fat is one copy of the FAT: each node's clusters chained in order.
func (l *layout) fat() []byte {
	b := make([]byte, l.fatSectors*sectorSize)
	le := binary.LittleEndian
	le.PutUint16(b[0:], 0xFFF8)
	le.PutUint16(b[2:], 0xFFFF)
	for _, n := range l.order {
		for i := range n.clusters {
			c := n.cluster + i
			next := uint16(c + 1)
			if i == n.clusters-1 {
				next = 0xFFFF
			}
			le.PutUint16(b[2*c:], next)
		}
	}
	return b
}
