package diskprobe

import (
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30

	uuid1 = "11111111-2222-4333-8444-555555555555"
	uuid2 = "66666666-7777-4888-9999-aaaaaaaaaaaa"
	uuid3 = "0badc0de-0123-4567-89ab-cdef01234567"
)

// TestGUIDMixedEndian decodes the ESP type GUID from its on-disk bytes as
// the UEFI specification lists them; a decoder that reads all 16 bytes
// big-endian would print 28732ac1-1ff8-d211-….
func TestGUIDMixedEndian(t *testing.T) {
	onDisk := []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}
	if got, want := guidString(onDisk), "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"; got != want {
		t.Errorf("guidString = %s, want %s", got, want)
	}
	if got := guidBytes(t, TypeESP); !reflect.DeepEqual(got, onDisk) {
		t.Errorf("test helper guidBytes(%s) = % x, want % x", TypeESP, got, onDisk)
	}
}

// corrupt flips one byte of d at off.
func corrupt(t *testing.T, d *memDisk, off int64) {
	b := make([]byte, 1)
	d.ReadAt(b, off)
	d.write(t, off, []byte{b[0] ^ 0xff})
}

func TestReadTableGPT(t *testing.T) {
	parts := []gptPart{
		{slot: 0, typ: TypeESP, uuid: uuid1, first: 2048, last: 4095, name: "EFI system"},
		{slot: 2, typ: TypeRootX86_64, uuid: uuid2, first: 4096, last: 8191, attrs: AttrNoAuto | 1, name: "racine-é-🐧"},
	}
	want512 := []Partition{
		{Number: 1, Start: 2048 * 512, Size: 2048 * 512, Type: TypeESP, PartUUID: uuid1, Name: "EFI system"},
		{Number: 3, Start: 4096 * 512, Size: 4096 * 512, Type: TypeRootX86_64, PartUUID: uuid2, Name: "racine-é-🐧", Attributes: AttrNoAuto | 1},
	}
	want4k := []Partition{
		{Number: 1, Start: 2048 * 4096, Size: 2048 * 4096, Type: TypeESP, PartUUID: uuid1, Name: "EFI system"},
		{Number: 3, Start: 4096 * 4096, Size: 4096 * 4096, Type: TypeRootX86_64, PartUUID: uuid2, Name: "racine-é-🐧", Attributes: AttrNoAuto | 1},
	}
	tests := []struct {
		name   string
		size   int64
		layout gptLayout
		damage func(t *testing.T, d *memDisk)
		ss     int
		want   []Partition
		err    error
		errHas string
	}{
		{name: "512-byte sectors, empty slot keeps numbering", size: 8 * mib, layout: gptLayout{parts: parts}, ss: 512, want: want512},
		{name: "4096-byte sectors", size: 64 * mib, layout: gptLayout{ss: 4096, parts: parts}, ss: 4096, want: want4k},
		{name: "4 TiB disk", size: 4 << 40, layout: gptLayout{parts: parts}, ss: 512, want: want512},
		{name: "primary header CRC broken: backup used", size: 8 * mib, layout: gptLayout{parts: parts}, ss: 512, want: want512,
			damage: func(t *testing.T, d *memDisk) { corrupt(t, d, 512+40) }},
		{name: "primary entry array CRC broken: backup used", size: 8 * mib, layout: gptLayout{parts: parts}, ss: 512, want: want512,
			damage: func(t *testing.T, d *memDisk) { corrupt(t, d, 1024+56) }},
		{name: "primary header zeroed: backup used", size: 8 * mib, layout: gptLayout{parts: parts}, ss: 512, want: want512,
			damage: func(t *testing.T, d *memDisk) { d.write(t, 512, make([]byte, 512)) }},
		{name: "4096: primary broken, backup used", size: 64 * mib, layout: gptLayout{ss: 4096, parts: parts}, ss: 4096, want: want4k,
			damage: func(t *testing.T, d *memDisk) { corrupt(t, d, 4096+24) }},
		{name: "both headers broken", size: 8 * mib, layout: gptLayout{parts: parts},
			damage: func(t *testing.T, d *memDisk) { corrupt(t, d, 512+40); corrupt(t, d, 8*mib-512+40) },
			err:    ErrCorruptGPT, errHas: "header CRC32"},
		{name: "both headers missing", size: 8 * mib, layout: gptLayout{parts: parts},
			damage: func(t *testing.T, d *memDisk) {
				d.write(t, 512, make([]byte, 512))
				d.write(t, 8*mib-512, make([]byte, 512))
			},
			err: ErrCorruptGPT, errHas: `no "EFI PART" header`},
		{name: "entry past the device end is dropped", size: 8 * mib, ss: 512,
			layout: gptLayout{parts: []gptPart{parts[0], {slot: 1, typ: TypeLinuxData, uuid: uuid3, first: 8192, last: 1 << 40}}},
			want:   want512[:1]},
		{name: "entry ending before it starts is dropped", size: 8 * mib, ss: 512,
			layout: gptLayout{parts: []gptPart{parts[0], {slot: 1, typ: TypeLinuxData, uuid: uuid3, first: 9000, last: 8000}}},
			want:   want512[:1]},
		{name: "8 entries of 256 bytes", size: 8 * mib, ss: 512, layout: gptLayout{entries: 8, esize: 256, parts: parts}, want: want512},
		{name: "too many entries", size: 8 * mib, layout: gptLayout{entries: 2000, parts: parts}, err: ErrCorruptGPT, errHas: "2000 partition entries"},
		{name: "entry size not a multiple of 8", size: 8 * mib, layout: gptLayout{entries: 4, esize: 132, parts: parts}, err: ErrCorruptGPT, errHas: "entry size 132"},
		{name: "entry size too large", size: 64 * mib, layout: gptLayout{entries: 4, esize: 8192, parts: parts}, err: ErrCorruptGPT, errHas: "entry size 8192"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDisk(tc.size)
			writeGPT(t, d, tc.layout)
			if tc.damage != nil {
				tc.damage(t, d)
			}
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
			if got.Scheme != "gpt" || got.SectorSize != tc.ss || got.ID != "a0a0a0a0-b1b1-c2c2-d3d3-e4e4e4e4e4e4" {
				t.Errorf("table = %s, %d-byte sectors, id %s; want gpt, %d, a0a0a0a0-…", got.Scheme, got.SectorSize, got.ID, tc.ss)
			}
			if !reflect.DeepEqual(got.Partitions, tc.want) {
				t.Errorf("partitions:\n got %+v\nwant %+v", got.Partitions, tc.want)
			}
		})
	}
}

// TestReadTableGPTHostileHeader makes the header itself ask for absurd
// things, with valid CRCs, so the bounds are what stops them.
func TestReadTableGPTHostileHeader(t *testing.T) {
	tests := []struct {
		name   string
		off    int // in the header
		val    uint64
		width  int
		errHas string
	}{
		{"header size past the sector", 12, 600, 4, "header size 600"},
		{"header size too small", 12, 40, 4, "header size 40"},
		{"wrong own LBA", 24, 7, 8, "at LBA 7"},
		{"usable range past the end", 48, 1 << 40, 8, "usable LBAs"},
		{"entry array at LBA 0", 72, 0, 8, "entry array at LBA 0"},
		{"entry array past the end", 72, 16383, 8, "runs past the device end"},
		{"huge entry count", 80, 0xffffffff, 4, "4294967295 partition entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDisk(8 * mib)
			writeGPT(t, d, gptLayout{parts: []gptPart{{typ: TypeLinuxData, uuid: uuid1, first: 2048, last: 4095}}})
			for _, lba := range []int64{1, 8*mib/512 - 1} {
				h := make([]byte, 512)
				d.ReadAt(h, lba*512)
				for i := 0; i < tc.width; i++ {
					h[tc.off+i] = byte(tc.val >> (8 * i))
				}
				h[16], h[17], h[18], h[19] = 0, 0, 0, 0
				hs := 92
				if tc.off == 12 && tc.val <= 512 && tc.val >= 92 {
					hs = int(tc.val)
				}
				c := crc32.ChecksumIEEE(h[:hs])
				h[16], h[17], h[18], h[19] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
				d.write(t, lba*512, h)
			}
			_, err := ReadTable(d, d.size)
			if !errors.Is(err, ErrCorruptGPT) || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("ReadTable error = %v, want ErrCorruptGPT containing %q", err, tc.errHas)
			}
		})
	}
}
