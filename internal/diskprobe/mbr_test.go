package diskprobe

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fatBootSector is the start of a FAT32 volume's boot sector as mkfs.fat
// writes it: a jump, an OEM name, a BPB and "FAT32   " at 82.
func fatBootSector() []byte {
	b := make([]byte, 512)
	copy(b, []byte{0xeb, 0x58, 0x90})
	copy(b[3:], "mkfs.fat")
	b[11], b[12] = 0x00, 0x02 // 512 bytes per sector
	copy(b[82:], "FAT32   ")
	copy(b[90:], "\x0e\x1f\xbe\x77\x7c\xac") // boot code
	b[510], b[511] = 0x55, 0xaa
	return b
}

func TestReadTableMBR(t *testing.T) {
	const sig = 0x1234abcd
	linux := func(n int, startLBA, sectors int64) Partition {
		return Partition{Number: n, Start: startLBA * 512, Size: sectors * 512, Type: "0x83", PartUUID: "1234abcd-" + hex2(n)}
	}
	withType := func(p Partition, typ string) Partition { p.Type = typ; return p }
	tests := []struct {
		name   string
		size   int64
		write  func(t *testing.T, d *memDisk)
		want   []Partition
		err    error
		errHas string
	}{
		{name: "primaries by slot", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0x80, 0x83, 2048, 2048}, mbrPart{}, mbrPart{0, 0x82, 4096, 1024}))
			},
			want: []Partition{linux(1, 2048, 2048), withType(linux(3, 4096, 1024), "0x82")}},
		{name: "logical partitions in chain order", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x83, 2048, 2048}, mbrPart{0, 0x05, 8192, 32768}))
				d.write(t, 8192*512, mbrSector(0, mbrPart{0, 0x83, 2048, 4096}, mbrPart{0, 0x05, 16384, 8192}))
				d.write(t, (8192+16384)*512, mbrSector(0, mbrPart{0, 0x82, 2048, 2048}))
			},
			want: []Partition{linux(1, 2048, 2048), withType(linux(2, 8192, 32768), "0x05"),
				linux(5, 8192+2048, 4096), withType(linux(6, 8192+16384+2048, 2048), "0x82")}},
		{name: "extended type 0x0f, LBA", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x0f, 2048, 8192}))
				d.write(t, 2048*512, mbrSector(0, mbrPart{0, 0x83, 63, 1000}))
			},
			want: []Partition{withType(linux(1, 2048, 8192), "0x0f"), linux(5, 2048+63, 1000)}},
		{name: "looping EBR chain stops", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x05, 2048, 32768}))
				d.write(t, 2048*512, mbrSector(0, mbrPart{0, 0x83, 64, 1000}, mbrPart{0, 0x05, 4096, 4096}))
				d.write(t, (2048+4096)*512, mbrSector(0, mbrPart{0, 0x83, 64, 1000}, mbrPart{0, 0x05, 1, 4096})) // links to LBA 2049
				d.write(t, 2049*512, mbrSector(0, mbrPart{0, 0x05, 4096, 4096}))                                 // and back to 2048+4096
			},
			want: []Partition{withType(linux(1, 2048, 32768), "0x05"), linux(5, 2048+64, 1000), linux(6, 2048+4096+64, 1000)}},
		{name: "EBR linking to itself", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x85, 2048, 32768}))
				d.write(t, (2048+100)*512, mbrSector(0, mbrPart{0, 0x83, 64, 10}, mbrPart{0, 0x05, 100, 1000}))
				d.write(t, 2048*512, mbrSector(0, mbrPart{0, 0x05, 100, 1000}))
			},
			want: []Partition{withType(linux(1, 2048, 32768), "0x85"), linux(5, 2048+100+64, 10)}},
		{name: "logical outside the container is skipped, its number kept", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x05, 2048, 8192}))
				d.write(t, 2048*512, mbrSector(0, mbrPart{0, 0x83, 64, 100000}, mbrPart{0, 0x05, 4096, 2048}))
				d.write(t, (2048+4096)*512, mbrSector(0, mbrPart{0, 0x83, 64, 100}))
			},
			want: []Partition{withType(linux(1, 2048, 8192), "0x05"), linux(6, 2048+4096+64, 100)}},
		{name: "EBR without signature ends the chain", size: 64 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x05, 2048, 8192}))
				e := mbrSector(0, mbrPart{0, 0x83, 64, 100})
				e[511] = 0
				d.write(t, 2048*512, e)
			},
			want: []Partition{withType(linux(1, 2048, 8192), "0x05")}},
		{name: "empty MBR", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { d.write(t, 0, mbrSector(sig)) },
			want:  nil},
		{name: "no signature", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) {},
			err:   ErrNoTable, errHas: "no 0x55aa"},
		{name: "device smaller than a sector", size: 100,
			write: func(t *testing.T, d *memDisk) {},
			err:   ErrNoTable, errHas: "smaller than one"},
		{name: "bare ext4", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "ext4", "root", uuid1) },
			err:   ErrNoTable, errHas: "no 0x55aa"},
		{name: "bare FAT volume", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { d.write(t, 0, fatBootSector()) },
			err:   ErrNoTable, errHas: "FAT/NTFS/exFAT boot sector"},
		{name: "bad boot flag", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { d.write(t, 0, mbrSector(sig, mbrPart{0x12, 0x83, 2048, 2048})) },
			err:   ErrNoTable, errHas: "boot flag 0x12"},
		{name: "boot flag on an empty entry", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x83, 2048, 2048}, mbrPart{0x4f, 0, 0, 0}))
			},
			err: ErrNoTable, errHas: "entry 2 has boot flag 0x4f"},
		{name: "past the device end", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { d.write(t, 0, mbrSector(sig, mbrPart{0, 0x83, 2048, 1 << 30})) },
			err:   ErrNoTable, errHas: "ends past"},
		{name: "starting at LBA 0", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) { d.write(t, 0, mbrSector(sig, mbrPart{0, 0x83, 0, 2048})) },
			err:   ErrNoTable, errHas: "LBA 0"},
		{name: "overlapping", size: 16 * mib,
			write: func(t *testing.T, d *memDisk) {
				d.write(t, 0, mbrSector(sig, mbrPart{0, 0x83, 4096, 2048}, mbrPart{0, 0x83, 2048, 4096}))
			},
			err: ErrNoTable, errHas: "entries 2 and 1 overlap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDisk(tc.size)
			tc.write(t, d)
			got, err := ReadTable(d, d.size)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("ReadTable error = %v, want %v containing %q", err, tc.err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadTable: %v", err)
			}
			if got.Scheme != "mbr" || got.SectorSize != 512 || got.ID != "1234abcd" {
				t.Errorf("table = %s, %d-byte sectors, id %q; want mbr, 512, 1234abcd", got.Scheme, got.SectorSize, got.ID)
			}
			if !reflect.DeepEqual(got.Partitions, tc.want) {
				t.Errorf("partitions:\n got %+v\nwant %+v", got.Partitions, tc.want)
			}
		})
	}
}

// TestReadTableMBRLongChain makes a chain of 300 EBRs: ReadTable stops at
// the bound and reads no more than that many.
func TestReadTableMBRLongChain(t *testing.T) {
	d := newDisk(1 * gib)
	d.write(t, 0, mbrSector(7, mbrPart{0, 0x05, 2048, 1 << 20}))
	for i := uint32(0); i < 300; i++ {
		d.write(t, int64(2048+i*16)*512, mbrSector(0, mbrPart{0, 0x83, 8, 8}, mbrPart{0, 0x05, (i + 1) * 16, 16}))
	}
	d.reads = 0
	got, err := ReadTable(d, d.size)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Partitions) - 1; n != maxLogical {
		t.Errorf("%d logical partitions, want the bound %d", n, maxLogical)
	}
	if last := got.Partitions[len(got.Partitions)-1]; last.Number != 4+maxLogical || last.PartUUID != "00000007-84" {
		t.Errorf("last logical is %d (%s), want %d (00000007-84)", last.Number, last.PartUUID, 4+maxLogical)
	}
	if d.reads > maxLogical+1 {
		t.Errorf("%d reads, want at most %d", d.reads, maxLogical+1)
	}
}

func hex2(n int) string { return string("0123456789abcdef"[n>>4]) + string("0123456789abcdef"[n&15]) }
