package diskprobe

import (
	"errors"
	"fmt"
	"io"
)

// Partition is one entry of a partition table.
type Partition struct {
	// Number is the partition's number as the Linux kernel gives it: the
	// GPT entry slot index + 1 (empty slots keep their numbers); MBR
	// primaries 1-4 by slot, logical partitions 5, 6, … in EBR chain order.
	Number int
	// Start and Size are in bytes.
	Start int64
	Size  int64
	// Type is, on a GPT, the type GUID in lower-case canonical form; on
	// an MBR, the type byte as "0x83".
	Type string
	// PartUUID is what the kernel and blkid call PARTUUID: on a GPT the
	// entry's unique GUID in lower case; on an MBR "DISKSIG-NN", e.g.
	// "1234abcd-05".
	PartUUID string
	// Name is the GPT partition name; "" on an MBR.
	Name string
	// Attributes holds the GPT attribute bits (63 is the DPS no-auto
	// flag); 0 on an MBR.
	Attributes uint64
}

// IsExtended reports whether p is an MBR extended partition (types 0x05,
// 0x0f, 0x85): a container of logical partitions, never a root.
func (p Partition) IsExtended() bool {
	return p.Type == "0x05" || p.Type == "0x0f" || p.Type == "0x85"
}

// Table is a decoded partition table.
type Table struct {
	Scheme     string // "gpt" or "mbr"
	SectorSize int    // 512 or 4096 (an MBR is always read as 512)
	// ID is the GPT disk GUID in lower case, or the MBR disk signature as
	// 8 hex digits (what blkid prints as PTUUID).
	ID string
	// Partitions are in ascending Number order; unused GPT slots and
	// empty MBR entries are left out.
	Partitions []Partition
}

// ErrNoTable means the device holds neither a GPT nor an MBR. The error
// ReadTable returns wraps it and says what was seen instead.
var ErrNoTable = errors.New("no partition table")

// ErrCorruptGPT means a protective MBR announces a GPT but neither the
// primary nor the backup GPT header (with its entry array) is intact.
var ErrCorruptGPT = errors.New("corrupt GPT")

// ReadTable decodes the partition table of the size-byte device r. It
// tries a GPT first (when the MBR is protective, type 0xee) and an MBR
// otherwise. It returns an error wrapping ErrNoTable when there is no
// table, ErrCorruptGPT when a GPT is announced but unreadable, and I/O
// errors as they come.
func ReadTable(r io.ReaderAt, size int64) (Table, error) {
	if size < 0 {
		return Table{}, fmt.Errorf("diskprobe: device size %d is negative", size)
	}
	mbr, err := readAt(r, 0, 512, size)
	if err != nil {
		return Table{}, err
	}
	if mbr == nil {
		return Table{}, fmt.Errorf("%w: device is %d bytes, smaller than one 512-byte sector", ErrNoTable, size)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa {
		return Table{}, fmt.Errorf("%w: no 0x55aa boot signature at byte 510 (found 0x%02x%02x)", ErrNoTable, mbr[510], mbr[511])
	}
	if isProtective(mbr) {
		return readGPT(r, size)
	}
	return readMBR(r, size, mbr)
}

// readAt reads n bytes at off of a size-byte device. It returns nil, nil
// when the range lies (partly) beyond the device, so that callers treat a
// structure that does not fit as absent, and I/O errors otherwise.
func readAt(r io.ReaderAt, off int64, n int, size int64) ([]byte, error) {
	if off < 0 || n < 0 || off > size || int64(n) > size-off {
		return nil, nil
	}
	b := make([]byte, n)
	got, err := r.ReadAt(b, off)
	if got == n {
		return b, nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, nil
	}
	return nil, fmt.Errorf("diskprobe: reading %d bytes at offset %d: %w", n, off, err)
}
