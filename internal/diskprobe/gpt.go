package diskprobe

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf16"
)

// Bounds on what a GPT header may ask for. UEFI requires room for at least
// 128 entries of 128 bytes; tools write exactly that. The bounds keep a
// hostile header from making ReadTable allocate or loop much.
const (
	maxGPTEntries    = 1024
	minGPTEntrySize  = 128
	maxGPTEntrySize  = 4096
	maxGPTArrayBytes = 1 << 20
)

// sectorSizes are tried in this order; the header's own LBA field tells
// which one the table was written for.
var sectorSizes = [...]int{512, 4096}

// isProtective reports whether an MBR sector holds a GPT protective (or
// hybrid) entry, type 0xee.
func isProtective(mbr []byte) bool {
	for i := 0; i < 4; i++ {
		if mbr[446+16*i+4] == 0xee {
			return true
		}
	}
	return false
}

// GPT header (UEFI 2.10 §5.3.2), at LBA 1 and, as backup, at the last LBA.
// All integers are little-endian.
//
//	offset size field
//	     0    8 signature "EFI PART"
//	    12    4 header size, 92 ≤ n ≤ sector size
//	    16    4 CRC32 of the first n bytes, this field taken as zero
//	    24    8 LBA of this header
//	    40    8 first usable LBA
//	    48    8 last usable LBA
//	    56   16 disk GUID
//	    72    8 LBA of the partition entry array
//	    80    4 number of entries
//	    84    4 size of one entry
//	    88    4 CRC32 of the entry array
type gptHeader struct {
	diskGUID  string
	entryLBA  uint64
	entries   int
	entrySize int
	arrayCRC  uint32
}

// readGPT tries the primary header at LBA 1 with 512- then 4096-byte
// sectors, then the backup header at the last LBA likewise, and decodes
// the first intact one (header and entry array CRC32s match), so an
// intact primary always wins.
func readGPT(r io.ReaderAt, size int64) (Table, error) {
	var problems []string
	for _, backup := range []bool{false, true} {
		for _, ss := range sectorSizes {
			t, problem, err := tryGPT(r, size, ss, backup)
			if err != nil {
				return Table{}, err
			}
			if problem == "" {
				return t, nil
			}
			if problem != errNoSignature {
				problems = append(problems, problem)
			}
		}
	}
	if len(problems) == 0 {
		problems = append(problems, `no "EFI PART" header at LBA 1 or at the last LBA, for 512- or 4096-byte sectors`)
	}
	return Table{}, fmt.Errorf("%w: the MBR is protective (type 0xee) but no GPT header is intact: %s; repair it (gdisk recovery menu: b, c, w) or repartition the image",
		ErrCorruptGPT, strings.Join(problems, "; "))
}

const errNoSignature = "no signature"

// tryGPT decodes the GPT whose header sits at LBA 1 (or, for backup, the
// last LBA) of ss-byte sectors. A non-empty problem says why that header
// is unusable; err is an I/O error.
func tryGPT(r io.ReaderAt, size int64, ss int, backup bool) (t Table, problem string, err error) {
	sectors := uint64(size / int64(ss))
	if sectors < 3 {
		return Table{}, errNoSignature, nil
	}
	lba, where := uint64(1), "primary header at LBA 1"
	if backup {
		lba, where = sectors-1, fmt.Sprintf("backup header at LBA %d", sectors-1)
	}
	where += fmt.Sprintf(" (%d-byte sectors)", ss)
	b, err := readAt(r, int64(lba)*int64(ss), ss, size)
	if err != nil || b == nil {
		return Table{}, errNoSignature, err
	}
	if string(b[0:8]) != "EFI PART" {
		return Table{}, errNoSignature, nil
	}
	h, problem := parseGPTHeader(b, lba, sectors)
	if problem != "" {
		return Table{}, where + ": " + problem, nil
	}
	n := h.entries * h.entrySize
	arr, err := readAt(r, int64(h.entryLBA)*int64(ss), n, size)
	if err != nil {
		return Table{}, "", err
	}
	if arr == nil {
		return Table{}, fmt.Sprintf("%s: entry array (%d bytes at LBA %d) runs past the device end", where, n, h.entryLBA), nil
	}
	if got := crc32.ChecksumIEEE(arr); got != h.arrayCRC {
		return Table{}, fmt.Sprintf("%s: entry array CRC32 is 0x%08x, header says 0x%08x", where, got, h.arrayCRC), nil
	}
	t = Table{Scheme: "gpt", SectorSize: ss, ID: h.diskGUID}
	for i := 0; i < h.entries; i++ {
		if p, ok := parseGPTEntry(arr[i*h.entrySize:(i+1)*h.entrySize], sectors, ss); ok {
			p.Number = i + 1
			t.Partitions = append(t.Partitions, p)
		}
	}
	return t, "", nil
}

// parseGPTHeader checks a header read at lba of a sectors-long device.
func parseGPTHeader(b []byte, lba, sectors uint64) (gptHeader, string) {
	le := binary.LittleEndian
	hsize := le.Uint32(b[12:16])
	if hsize < 92 || int(hsize) > len(b) {
		return gptHeader{}, fmt.Sprintf("header size %d, want 92 to %d", hsize, len(b))
	}
	want := le.Uint32(b[16:20])
	c := make([]byte, hsize)
	copy(c, b)
	clear(c[16:20])
	if got := crc32.ChecksumIEEE(c); got != want {
		return gptHeader{}, fmt.Sprintf("header CRC32 is 0x%08x, header says 0x%08x", got, want)
	}
	if my := le.Uint64(b[24:32]); my != lba {
		return gptHeader{}, fmt.Sprintf("header says it is at LBA %d, read at LBA %d", my, lba)
	}
	first, last := le.Uint64(b[40:48]), le.Uint64(b[48:56])
	if first > last || last >= sectors {
		return gptHeader{}, fmt.Sprintf("usable LBAs %d-%d do not fit a device of %d sectors", first, last, sectors)
	}
	h := gptHeader{
		diskGUID: guidString(b[56:72]),
		entryLBA: le.Uint64(b[72:80]),
		arrayCRC: le.Uint32(b[88:92]),
	}
	count, esize := le.Uint32(b[80:84]), le.Uint32(b[84:88])
	if count > maxGPTEntries {
		return gptHeader{}, fmt.Sprintf("%d partition entries, at most %d supported", count, maxGPTEntries)
	}
	if esize < minGPTEntrySize || esize > maxGPTEntrySize || esize%8 != 0 {
		return gptHeader{}, fmt.Sprintf("partition entry size %d, want a multiple of 8 from %d to %d", esize, minGPTEntrySize, maxGPTEntrySize)
	}
	if count*esize > maxGPTArrayBytes {
		return gptHeader{}, fmt.Sprintf("entry array of %d bytes, at most %d supported", count*esize, maxGPTArrayBytes)
	}
	if h.entryLBA == 0 || h.entryLBA >= sectors {
		return gptHeader{}, fmt.Sprintf("entry array at LBA %d, outside the device's %d sectors", h.entryLBA, sectors)
	}
	h.entries, h.entrySize = int(count), int(esize)
	return h, ""
}

// GPT partition entry (UEFI 2.10 §5.3.3):
//
//	offset size field
//	     0   16 type GUID; all zero marks an unused slot
//	    16   16 unique partition GUID
//	    32    8 first LBA
//	    40    8 last LBA, inclusive
//	    48    8 attribute bits
//	    56   72 name, UTF-16LE, NUL-padded
//
// Like the kernel, parseGPTEntry drops entries that are unused or that
// end before they start or past the device; their slot numbers stay
// taken.
func parseGPTEntry(e []byte, sectors uint64, ss int) (Partition, bool) {
	if isZero(e[0:16]) {
		return Partition{}, false
	}
	le := binary.LittleEndian
	first, last := le.Uint64(e[32:40]), le.Uint64(e[40:48])
	if first > last || last >= sectors {
		return Partition{}, false
	}
	return Partition{
		Start:      int64(first) * int64(ss),
		Size:       int64(last-first+1) * int64(ss),
		Type:       guidString(e[0:16]),
		PartUUID:   guidString(e[16:32]),
		Name:       utf16Name(e[56:128]),
		Attributes: le.Uint64(e[48:56]),
	}, true
}

// utf16Name decodes a NUL-terminated UTF-16LE name.
func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
