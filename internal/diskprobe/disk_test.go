package diskprobe

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"unicode/utf16"
)

// memDisk is a sparse in-memory disk: only written 4 KiB pages are kept,
// so tests can make terabyte devices. It counts reads, for the tests that
// check how little FindRoot reads.
type memDisk struct {
	size      int64
	pages     map[int64][]byte
	reads     int
	readBytes int64
}

const pageSize = 4096

func newDisk(size int64) *memDisk { return &memDisk{size: size, pages: map[int64][]byte{}} }

func (d *memDisk) ReadAt(p []byte, off int64) (int, error) {
	d.reads++
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= d.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > d.size-off {
		n = int(d.size - off)
	}
	for i := 0; i < n; {
		pg, in := (off+int64(i))/pageSize, int((off+int64(i))%pageSize)
		c := min(pageSize-in, n-i)
		if b, ok := d.pages[pg]; ok {
			copy(p[i:i+c], b[in:])
		} else {
			clear(p[i : i+c])
		}
		i += c
	}
	d.readBytes += int64(n)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// write puts b at off; the test fails if it does not fit.
func (d *memDisk) write(t testing.TB, off int64, b []byte) {
	t.Helper()
	if off < 0 || off+int64(len(b)) > d.size {
		t.Fatalf("test image: write of %d bytes at %d outside a %d-byte disk", len(b), off, d.size)
	}
	for i := 0; i < len(b); {
		pg, in := (off+int64(i))/pageSize, int((off+int64(i))%pageSize)
		c := min(pageSize-in, len(b)-i)
		if d.pages[pg] == nil {
			d.pages[pg] = make([]byte, pageSize)
		}
		copy(d.pages[pg][in:], b[i:i+c])
		i += c
	}
}

// bytes returns the whole disk; for small disks (fuzz seeds) only.
func (d *memDisk) bytes() []byte {
	b := make([]byte, d.size)
	d.ReadAt(b, 0)
	return b
}

// guidBytes encodes a canonical GUID the way GPT stores it: the first
// three groups little-endian. Written from the UEFI text, independent of
// the decoder's guidString.
func guidBytes(t testing.TB, s string) []byte {
	t.Helper()
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(raw) != 16 {
		t.Fatalf("test GUID %q: %v", s, err)
	}
	b := append([]byte(nil), raw...)
	b[0], b[1], b[2], b[3] = raw[3], raw[2], raw[1], raw[0]
	b[4], b[5] = raw[5], raw[4]
	b[6], b[7] = raw[7], raw[6]
	return b
}

type gptPart struct {
	slot        int // 0-based entry slot
	typ, uuid   string
	first, last uint64
	attrs       uint64
	name        string
}

type gptLayout struct {
	ss      int    // sector size; 512 when 0
	entries int    // entry slots; 128 when 0
	esize   int    // entry size; 128 when 0
	disk    string // disk GUID
	parts   []gptPart
}

// writeGPT writes a protective MBR, the primary GPT at LBA 1 with its
// array at LBA 2, and the backup array and header at the end of d.
func writeGPT(t testing.TB, d *memDisk, g gptLayout) {
	t.Helper()
	ss, n, es := g.ss, g.entries, g.esize
	if ss == 0 {
		ss = 512
	}
	if n == 0 {
		n = 128
	}
	if es == 0 {
		es = 128
	}
	if g.disk == "" {
		g.disk = "a0a0a0a0-b1b1-c2c2-d3d3-e4e4e4e4e4e4"
	}
	sectors := uint64(d.size) / uint64(ss)
	arrSectors := uint64((n*es + ss - 1) / ss)
	arr := make([]byte, n*es)
	for _, p := range g.parts {
		e := arr[p.slot*es:]
		copy(e[0:16], guidBytes(t, p.typ))
		copy(e[16:32], guidBytes(t, p.uuid))
		binary.LittleEndian.PutUint64(e[32:], p.first)
		binary.LittleEndian.PutUint64(e[40:], p.last)
		binary.LittleEndian.PutUint64(e[48:], p.attrs)
		for i, c := range utf16.Encode([]rune(p.name)) {
			binary.LittleEndian.PutUint16(e[56+2*i:], c)
		}
	}
	d.write(t, 0, pmbr(sectors))
	header := func(my, alt, arrLBA uint64) []byte {
		h := make([]byte, ss)
		copy(h, "EFI PART")
		le := binary.LittleEndian
		le.PutUint32(h[8:], 0x00010000)
		le.PutUint32(h[12:], 92)
		le.PutUint64(h[24:], my)
		le.PutUint64(h[32:], alt)
		le.PutUint64(h[40:], 2+arrSectors)
		le.PutUint64(h[48:], sectors-2-arrSectors)
		copy(h[56:72], guidBytes(t, g.disk))
		le.PutUint64(h[72:], arrLBA)
		le.PutUint32(h[80:], uint32(n))
		le.PutUint32(h[84:], uint32(es))
		le.PutUint32(h[88:], crc32.ChecksumIEEE(arr))
		le.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	last := sectors - 1
	d.write(t, int64(ss), header(1, last, 2))
	d.write(t, 2*int64(ss), arr)
	d.write(t, int64(last-arrSectors)*int64(ss), arr)
	d.write(t, int64(last)*int64(ss), header(last, 1, last-arrSectors))
}

// pmbr is a protective MBR covering a disk of the given sectors.
func pmbr(sectors uint64) []byte {
	b := make([]byte, 512)
	e := b[446:]
	e[4] = 0xee
	binary.LittleEndian.PutUint32(e[8:], 1)
	binary.LittleEndian.PutUint32(e[12:], uint32(min(sectors-1, 0xffffffff)))
	b[510], b[511] = 0x55, 0xaa
	return b
}

type mbrPart struct {
	boot, typ     byte
	start, length uint32
}

// mbrSector is an MBR or EBR with up to four entries.
func mbrSector(sig uint32, parts ...mbrPart) []byte {
	b := make([]byte, 512)
	binary.LittleEndian.PutUint32(b[440:], sig)
	for i, p := range parts {
		e := b[446+16*i:]
		e[0], e[4] = p.boot, p.typ
		binary.LittleEndian.PutUint32(e[8:], p.start)
		binary.LittleEndian.PutUint32(e[12:], p.length)
	}
	b[510], b[511] = 0x55, 0xaa
	return b
}

// Superblocks with just the fields DetectFS reads, laid out from the
// ext4, XFS and btrfs on-disk format documents.

func extSuperblock(t testing.TB, label, uuid string) []byte {
	b := make([]byte, 2048)
	sb := b[1024:]
	le := binary.LittleEndian
	le.PutUint32(sb[0:], 2048)  // s_inodes_count
	le.PutUint32(sb[4:], 8192)  // s_blocks_count_lo
	le.PutUint32(sb[24:], 2)    // s_log_block_size: 4 KiB
	le.PutUint32(sb[32:], 8192) // s_blocks_per_group
	le.PutUint16(sb[56:], 0xef53)
	le.PutUint32(sb[76:], 1) // s_rev_level
	copy(sb[104:120], uuidBytes(t, uuid))
	copy(sb[120:136], label)
	return b
}

func xfsSuperblock(t testing.TB, label, uuid string) []byte {
	b := make([]byte, 512)
	copy(b, "XFSB")
	binary.BigEndian.PutUint32(b[4:], 4096)
	copy(b[32:48], uuidBytes(t, uuid))
	binary.BigEndian.PutUint16(b[102:], 512)
	copy(b[108:120], label)
	return b
}

// btrfsSuperblock is the 4 KiB btrfs superblock, to be written at 64 KiB.
func btrfsSuperblock(t testing.TB, label, uuid string) []byte {
	b := make([]byte, 4096)
	copy(b[0x20:0x30], uuidBytes(t, uuid))
	copy(b[0x40:], "_BHRfS_M")
	copy(b[0x12b:0x22b], label)
	return b
}

func uuidBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		t.Fatalf("test UUID %q: %v", s, err)
	}
	return b
}

// putFS writes a file system of the given type at off.
func putFS(t testing.TB, d *memDisk, off int64, typ, label, uuid string) {
	t.Helper()
	switch typ {
	case "ext4":
		d.write(t, off, extSuperblock(t, label, uuid))
	case "xfs":
		d.write(t, off, xfsSuperblock(t, label, uuid))
	case "btrfs":
		d.write(t, off+0x10000, btrfsSuperblock(t, label, uuid))
	default:
		t.Fatalf("putFS: unknown type %q", typ)
	}
}
