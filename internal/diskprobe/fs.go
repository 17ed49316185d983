package diskprobe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// FS is a recognised file system.
type FS struct {
	// Type is "ext4" (also for ext2 and ext3, which the ext4 driver
	// mounts), "xfs" or "btrfs"; "" when nothing was recognised.
	Type  string
	Label string
	UUID  string // canonical lower-case 8-4-4-4-12
}

// String is how messages show a file system: `ext4 LABEL="root"`.
func (f FS) String() string {
	if f.Type == "" {
		return "no Linux file system"
	}
	if f.Label == "" {
		return f.Type + " UUID=" + f.UUID
	}
	return fmt.Sprintf("%s LABEL=%q", f.Type, f.Label)
}

// ErrNoFS means none of the known superblocks is present.
var ErrNoFS = errors.New("no ext2/3/4, xfs or btrfs superblock")

// Superblock locations. DetectFS reads headLen bytes at 0 (the XFS and
// ext superblocks) and, only if neither matches, btrfsLen bytes at
// btrfsOff (the btrfs superblock up to the end of its label).
const (
	headLen  = 2048
	extSB    = 1024
	btrfsOff = 0x10000
	btrfsLen = 0x22b
)

// DetectFS reads the superblocks at the start of r and says which file
// system it holds. It returns ErrNoFS when none matches and I/O errors as
// they come; a device too short to hold a superblock holds none.
func DetectFS(r io.ReaderAt) (FS, error) {
	head, err := readShort(r, 0, headLen)
	if err != nil {
		return FS{}, err
	}
	if fs, ok := xfs(head); ok {
		return fs, nil
	}
	if fs, ok := ext(head); ok {
		return fs, nil
	}
	sb, err := readShort(r, btrfsOff, btrfsLen)
	if err != nil {
		return FS{}, err
	}
	if fs, ok := btrfs(sb); ok {
		return fs, nil
	}
	return FS{}, ErrNoFS
}

// readShort reads up to n bytes at off; a read cut short by the end of r
// returns what was there.
func readShort(r io.ReaderAt, off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	got, err := r.ReadAt(b, off)
	if err != nil && got < n && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("diskprobe: reading %d bytes at offset %d: %w", n, off, err)
	}
	return b[:got], nil
}

// ext superblock, 1024 bytes in; integers little-endian.
//
//	offset size field
//	     0    4 s_inodes_count, > 0
//	    24    4 s_log_block_size, block size 1024<<n, n ≤ 6
//	    32    4 s_blocks_per_group, > 0
//	    56    2 s_magic 0xef53
//	    76    4 s_rev_level, 0 or 1
//	    96    4 s_feature_incompat; 0x8 marks an external journal
//	   104   16 s_uuid
//	   120   16 s_volume_name, NUL-padded
func ext(head []byte) (FS, bool) {
	if len(head) < extSB+136 {
		return FS{}, false
	}
	sb := head[extSB:]
	le := binary.LittleEndian
	if le.Uint16(sb[56:58]) != 0xef53 ||
		le.Uint32(sb[0:4]) == 0 ||
		le.Uint32(sb[24:28]) > 6 ||
		le.Uint32(sb[32:36]) == 0 ||
		le.Uint32(sb[76:80]) > 1 ||
		le.Uint32(sb[96:100])&0x8 != 0 {
		return FS{}, false
	}
	return FS{Type: "ext4", UUID: uuidString(sb[104:120]), Label: cstring(sb[120:136])}, true
}

// XFS superblock at byte 0; integers big-endian.
//
//	offset size field
//	     0    4 sb_magicnum "XFSB"
//	     4    4 sb_blocksize, a power of two from 512 to 65536
//	    32   16 sb_uuid
//	   102    2 sb_sectsize, a power of two from 512 to 32768
//	   108   12 sb_fname (label), NUL-padded
func xfs(head []byte) (FS, bool) {
	if len(head) < 120 || string(head[0:4]) != "XFSB" {
		return FS{}, false
	}
	be := binary.BigEndian
	if !pow2In(uint64(be.Uint32(head[4:8])), 512, 65536) || !pow2In(uint64(be.Uint16(head[102:104])), 512, 32768) {
		return FS{}, false
	}
	return FS{Type: "xfs", UUID: uuidString(head[32:48]), Label: cstring(head[108:120])}, true
}

// btrfs superblock at 64 KiB (offsets below are from there).
//
//	offset size field
//	  0x20   16 fsid
//	  0x40    8 magic "_BHRfS_M"
//	 0x12b  256 label, NUL-terminated
func btrfs(sb []byte) (FS, bool) {
	if len(sb) < btrfsLen || string(sb[0x40:0x48]) != "_BHRfS_M" {
		return FS{}, false
	}
	return FS{Type: "btrfs", UUID: uuidString(sb[0x20:0x30]), Label: cstring(sb[0x12b:0x22b])}, true
}

func pow2In(v, lo, hi uint64) bool { return v >= lo && v <= hi && v&(v-1) == 0 }

// cstring is b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
