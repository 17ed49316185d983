package diskprobe

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
)

// maxLogical bounds the EBR chain: at most this many EBRs are read, so a
// chain that loops or runs on cannot hold ReadTable for long.
const maxLogical = 128

// An MBR (sector 0) and each EBR share one layout; integers are
// little-endian and addresses are 512-byte LBAs.
//
//	offset size field
//	   440    4 disk signature (MBR only)
//	   446   64 four 16-byte entries
//	   510    2 0x55 0xaa
//
//	entry: 0 boot flag (0x00 or 0x80), 4 type, 8 first LBA (4), 12 sectors (4)
type mbrEntry struct {
	boot, typ     byte
	start, length uint64
}

func mbrEntries(b []byte) [4]mbrEntry {
	var es [4]mbrEntry
	for i := range es {
		e := b[446+16*i:]
		es[i] = mbrEntry{
			boot:   e[0],
			typ:    e[4],
			start:  uint64(binary.LittleEndian.Uint32(e[8:12])),
			length: uint64(binary.LittleEndian.Uint32(e[12:16])),
		}
	}
	return es
}

func isExtendedType(t byte) bool { return t == 0x05 || t == 0x0f || t == 0x85 }

// readMBR decodes sector 0 (b) of a size-byte device. It refuses, with
// ErrNoTable, a sector whose entries make no sense as a partition table:
// a FAT or NTFS boot sector also ends in 0x55aa.
func readMBR(r io.ReaderAt, size int64, b []byte) (Table, error) {
	sectors := uint64(size / 512)
	es := mbrEntries(b)
	if problem := checkPrimaries(es, sectors); problem != "" {
		return Table{}, fmt.Errorf("%w: 0x55aa at byte 510 but not an MBR: %s", ErrNoTable, problem)
	}
	if es[0].length == 0 && es[1].length == 0 && es[2].length == 0 && es[3].length == 0 && looksLikeVBR(b) {
		return Table{}, fmt.Errorf("%w: sector 0 is a FAT/NTFS/exFAT boot sector (a bare file system), not an MBR", ErrNoTable)
	}
	sig := binary.LittleEndian.Uint32(b[440:444])
	t := Table{Scheme: "mbr", SectorSize: 512, ID: fmt.Sprintf("%08x", sig)}
	for i, e := range es {
		if e.length != 0 {
			t.Partitions = append(t.Partitions, mbrPartition(i+1, sig, e.typ, e.start, e.length))
		}
	}
	next := 5
	for _, e := range es {
		if e.length == 0 || !isExtendedType(e.typ) {
			continue
		}
		logical, err := readLogical(r, size, sig, e, &next)
		if err != nil {
			return Table{}, err
		}
		t.Partitions = append(t.Partitions, logical...)
	}
	return t, nil
}

func mbrPartition(n int, sig uint32, typ byte, start, length uint64) Partition {
	return Partition{
		Number:   n,
		Start:    int64(start) * 512,
		Size:     int64(length) * 512,
		Type:     fmt.Sprintf("0x%02x", typ),
		PartUUID: fmt.Sprintf("%08x-%02x", sig, n),
	}
}

// checkPrimaries says what is wrong with the four primary entries, or "".
func checkPrimaries(es [4]mbrEntry, sectors uint64) string {
	var used []int
	for i, e := range es {
		if e.boot != 0x00 && e.boot != 0x80 {
			return fmt.Sprintf("entry %d has boot flag 0x%02x, want 0x00 or 0x80", i+1, e.boot)
		}
		if e.length == 0 {
			continue
		}
		if e.start == 0 {
			return fmt.Sprintf("entry %d starts at LBA 0, on the MBR itself", i+1)
		}
		if e.start+e.length > sectors {
			return fmt.Sprintf("entry %d (LBA %d, %d sectors) ends past the device's %d sectors", i+1, e.start, e.length, sectors)
		}
		used = append(used, i)
	}
	sort.Slice(used, func(a, b int) bool { return es[used[a]].start < es[used[b]].start })
	for k := 1; k < len(used); k++ {
		p, q := es[used[k-1]], es[used[k]]
		if p.start+p.length > q.start {
			return fmt.Sprintf("entries %d and %d overlap", used[k-1]+1, used[k]+1)
		}
	}
	return ""
}

// looksLikeVBR reports whether sector 0 is the boot sector of a FAT,
// NTFS or exFAT volume: an x86 jump followed by the file system's name.
func looksLikeVBR(b []byte) bool {
	if !(b[0] == 0xeb && b[2] == 0x90) && b[0] != 0xe9 {
		return false
	}
	oem := string(b[3:11])
	return oem == "NTFS    " || oem == "EXFAT   " ||
		strings.HasPrefix(string(b[54:62]), "FAT") || strings.HasPrefix(string(b[82:90]), "FAT")
}

// readLogical follows the EBR chain of the extended partition ext. Each
// EBR's non-extended entries are logical partitions, addressed from that
// EBR; its first extended entry links to the next EBR, addressed from the
// start of ext. Like the kernel, it numbers logical partitions from *next
// in chain order and stops at a missing signature; it also stops at a
// link outside ext, at an EBR seen before, and after maxLogical EBRs.
// Entries 3 and 4 of an EBR often hold garbage, so every logical must lie
// inside ext and the device; one that does not is skipped, and its number
// stays taken.
func readLogical(r io.ReaderAt, size int64, sig uint32, ext mbrEntry, next *int) ([]Partition, error) {
	var out []Partition
	extEnd := ext.start + ext.length
	seen := make(map[uint64]bool)
	ebr := ext.start
	for hops := 0; hops < maxLogical && *next < 5+maxLogical; hops++ {
		if seen[ebr] {
			break
		}
		seen[ebr] = true
		b, err := readAt(r, int64(ebr)*512, 512, size)
		if err != nil {
			return nil, err
		}
		if b == nil || b[510] != 0x55 || b[511] != 0xaa {
			break
		}
		var link *mbrEntry
		es := mbrEntries(b)
		for i := range es {
			e := es[i]
			if e.length == 0 {
				continue
			}
			if isExtendedType(e.typ) {
				if link == nil {
					link = &es[i]
				}
				continue
			}
			start := ebr + e.start
			if e.start != 0 && start+e.length <= extEnd {
				out = append(out, mbrPartition(*next, sig, e.typ, start, e.length))
			}
			*next++
		}
		if link == nil || link.start == 0 || link.start >= ext.length {
			break
		}
		ebr = ext.start + link.start
	}
	return out, nil
}
