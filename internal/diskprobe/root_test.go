package diskprobe

import (
	"errors"
	"strings"
	"testing"
)

// part describes one partition of a test disk and what it holds: fs is
// "ext4", "xfs", "btrfs", "fat", "swap" or "" (nothing).
type part struct {
	typ   string // GPT type GUID, or an MBR type like "0x83"
	attrs uint64
	name  string
	fs    string
	label string
}

// partUUIDs of gptDisk partitions: partition n gets gptUUID(n).
func gptUUID(n int) string { return "0000000" + string(rune('0'+n)) + "-aaaa-4bbb-8ccc-dddddddddddd" }

// gptDisk lays parts out as 8 MiB partitions from 1 MiB on a 512-sector
// GPT disk; a part with an empty typ leaves its slot unused.
func gptDisk(t *testing.T, parts ...part) *memDisk {
	d := newDisk(128 * mib)
	var g gptLayout
	for i, p := range parts {
		if p.typ == "" {
			continue
		}
		first := uint64(2048 + i*16384)
		g.parts = append(g.parts, gptPart{slot: i, typ: p.typ, uuid: gptUUID(i + 1), first: first, last: first + 16383, attrs: p.attrs, name: p.name})
		putTestFS(t, d, int64(first)*512, p)
	}
	writeGPT(t, d, g)
	return d
}

func putTestFS(t *testing.T, d *memDisk, off int64, p part) {
	switch p.fs {
	case "":
	case "fat":
		d.write(t, off, fatBootSector())
	case "swap":
		d.write(t, off+4096-10, []byte("SWAPSPACE2"))
	default:
		putFS(t, d, off, p.fs, p.label, uuid1)
	}
}

func TestFindRoot(t *testing.T) {
	esp := part{typ: TypeESP, name: "EFI system", fs: "fat"}
	swap := part{typ: TypeSwap, fs: "swap"}
	tests := []struct {
		name      string
		disk      func(t *testing.T) *memDisk
		choice    Choice
		wantPart  int // 0: whole device
		wantFS    string
		wantLabel string
		reasonHas []string
		err       error
		errHas    []string
	}{
		{name: "DPS root wins over another Linux partition",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, esp, part{typ: TypeLinuxData, fs: "ext4", label: "data"}, part{typ: TypeRootX86_64, fs: "xfs", label: "sys"})
			},
			wantPart: 3, wantFS: "xfs", wantLabel: "sys", reasonHas: []string{"partition 3", "root-x86-64", "Discoverable Partitions"}},
		{name: "first of two DPS roots",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeRootX86_64, fs: "ext4", label: "a"}, part{typ: TypeRootX86_64, fs: "ext4", label: "b"})
			},
			wantPart: 1, wantFS: "ext4", wantLabel: "a"},
		{name: "DPS root with no-auto is skipped",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeRootX86_64, attrs: AttrNoAuto, fs: "ext4", label: "old"}, part{typ: TypeLinuxData, fs: "btrfs", label: "new"})
			},
			wantPart: 2, wantFS: "btrfs", wantLabel: "new", reasonHas: []string{"only partition with a Linux file system"}},
		{name: "DPS root without a known file system is still the root",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeLinuxData, fs: "ext4"}, part{typ: TypeRootX86_64})
			},
			wantPart: 2, reasonHas: []string{"root-x86-64", "no Linux file system"}},
		{name: "only Linux file system beside ESP and swap",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, esp, swap, part{}, part{typ: TypeLinuxData, fs: "ext4", label: "root"})
			},
			wantPart: 4, wantFS: "ext4", wantLabel: "root", reasonHas: []string{"partition 4: the only partition", `ext4 LABEL="root"`}},
		{name: "DPS /home and /var are not roots",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeHome, fs: "ext4"}, part{typ: TypeLinuxData, fs: "xfs"}, part{typ: TypeVar, fs: "ext4"})
			},
			wantPart: 2, wantFS: "xfs"},
		{name: "two Linux partitions",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, esp, part{typ: TypeLinuxData, fs: "ext4", label: "one"}, part{typ: TypeLinuxData, fs: "xfs", label: "two"})
			},
			err: ErrAmbiguousRoot,
			errHas: []string{`partition 2 (linux, ext4 LABEL="one", 8 MiB)`, `partition 3 (linux, xfs LABEL="two", 8 MiB)`,
				"bootfleet.root.part=N", "PARTUUID=", "LABEL="}},
		{name: "GPT without a Linux file system",
			disk: func(t *testing.T) *memDisk { return gptDisk(t, esp, swap) },
			err:  ErrNoRoot,
			errHas: []string{`partition 1 (esp, no Linux file system, 8 MiB, name "EFI system")`, "partition 2 (swap, no Linux file system, 8 MiB)",
				"root-x86-64", "bootfleet.root.part"}},
		{name: "no-auto root alone is not chosen",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeRootX86_64, attrs: AttrNoAuto, fs: "ext4"})
			},
			err: ErrNoRoot, errHas: []string{"no-auto attribute set"}},
		{name: "MBR logical partition",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, mbrSector(0xcafe0001, mbrPart{0x80, 0x0c, 2048, 2048}, mbrPart{0, 0x05, 8192, 32768}))
				d.write(t, 8192*512, mbrSector(0, mbrPart{0, 0x82, 2048, 2048}, mbrPart{0, 0x05, 8192, 16384}))
				d.write(t, (8192+8192)*512, mbrSector(0, mbrPart{0, 0x83, 2048, 8192}))
				putFS(t, d, (8192+8192+2048)*512, "ext4", "mbrroot", uuid2)
				return d
			},
			wantPart: 6, wantFS: "ext4", wantLabel: "mbrroot"},
		{name: "whole device ext4",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				putFS(t, d, 0, "ext4", "bare", uuid1)
				return d
			},
			wantFS: "ext4", wantLabel: "bare", reasonHas: []string{"whole device: ext4 LABEL=\"bare\" (no partition table)"}},
		{name: "whole device btrfs behind an empty MBR",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, mbrSector(1))
				putFS(t, d, 0, "btrfs", "bare", uuid1)
				return d
			},
			wantFS: "btrfs", wantLabel: "bare", reasonHas: []string{"mbr partition table is empty"}},
		{name: "nothing at all",
			disk: func(t *testing.T) *memDisk { return newDisk(64 * mib) },
			err:  ErrNoRoot, errHas: []string{"no partition table", "no ext2/3/4, xfs or btrfs", "make a file system"}},
		{name: "bare FAT volume",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, fatBootSector())
				return d
			},
			err: ErrNoRoot, errHas: []string{"FAT/NTFS/exFAT boot sector"}},
		{name: "corrupt GPT",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, pmbr(uint64(64*mib/512)))
				return d
			},
			err: ErrCorruptGPT},

		{name: "explicit number over DPS",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeLinuxData, fs: "ext4", label: "x"}, part{typ: TypeRootX86_64, fs: "ext4"})
			},
			choice: Choice{Part: 1}, wantPart: 1, wantFS: "ext4", wantLabel: "x", reasonHas: []string{"chosen by bootfleet.root.part=1"}},
		{name: "explicit number without a known file system",
			disk:   func(t *testing.T) *memDisk { return gptDisk(t, esp, part{typ: TypeLinuxData}) },
			choice: Choice{Part: 2}, wantPart: 2, reasonHas: []string{"no ext2/3/4, xfs or btrfs superblock", "anyway"}},
		{name: "explicit no-auto root",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeRootX86_64, attrs: AttrNoAuto, fs: "ext4"})
			},
			choice: Choice{Part: 1}, wantPart: 1, wantFS: "ext4"},
		{name: "explicit number that does not exist",
			disk:   func(t *testing.T) *memDisk { return gptDisk(t, esp, part{}, part{typ: TypeLinuxData, fs: "ext4"}) },
			choice: Choice{Part: 2}, err: ErrNoRoot,
			errHas: []string{"bootfleet.root.part=2 matches no partition", "partition 1 (esp", "partition 3 (linux, ext4"}},
		{name: "explicit PARTUUID, other case",
			disk:   func(t *testing.T) *memDisk { return gptDisk(t, esp, part{typ: TypeLinuxData, fs: "xfs"}) },
			choice: Choice{PartUUID: strings.ToUpper(gptUUID(2))}, wantPart: 2, wantFS: "xfs"},
		{name: "explicit MBR PARTUUID",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, mbrSector(0x1234abcd, mbrPart{0, 0x83, 2048, 2048}, mbrPart{0, 0x05, 8192, 8192}))
				d.write(t, 8192*512, mbrSector(0, mbrPart{0, 0x83, 2048, 2048}))
				return d
			},
			choice: Choice{PartUUID: "1234ABCD-05"}, wantPart: 5},
		{name: "explicit PARTUUID that does not exist",
			disk:   func(t *testing.T) *memDisk { return gptDisk(t, esp) },
			choice: Choice{PartUUID: uuid3}, err: ErrNoRoot, errHas: []string{"PARTUUID=" + uuid3, "matches no partition"}},
		{name: "explicit file system label",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeRootX86_64, fs: "ext4", label: "a"}, part{typ: TypeLinuxData, fs: "btrfs", label: "b"})
			},
			choice: Choice{Label: "b"}, wantPart: 2, wantFS: "btrfs", wantLabel: "b"},
		{name: "explicit GPT partition name",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeLinuxData, fs: "ext4", name: "system-A"}, part{typ: TypeLinuxData, fs: "ext4", name: "system-B"})
			},
			choice: Choice{Label: "system-B"}, wantPart: 2, wantFS: "ext4"},
		{name: "explicit label matching two partitions",
			disk: func(t *testing.T) *memDisk {
				return gptDisk(t, part{typ: TypeLinuxData, fs: "ext4", label: "sys"}, part{typ: TypeLinuxData, name: "sys"})
			},
			choice: Choice{Label: "sys"}, err: ErrAmbiguousRoot, errHas: []string{"partition 1", "partition 2", "PARTUUID="}},
		{name: "explicit label matching nothing",
			disk:   func(t *testing.T) *memDisk { return gptDisk(t, part{typ: TypeLinuxData, fs: "ext4", label: "sys"}) },
			choice: Choice{Label: "root"}, err: ErrNoRoot, errHas: []string{"LABEL=root matches no partition", `ext4 LABEL="sys"`}},
		{name: "explicit label on a whole device",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				putFS(t, d, 0, "xfs", "whole", uuid1)
				return d
			},
			choice: Choice{Label: "whole"}, wantFS: "xfs", wantLabel: "whole"},
		{name: "explicit number on a whole device",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				putFS(t, d, 0, "xfs", "whole", uuid1)
				return d
			},
			choice: Choice{Part: 1}, err: ErrNoRoot, errHas: []string{"bootfleet.root.part=1 matches nothing", "no partition table", `xfs LABEL="whole"`, "to use the whole device"}},
		{name: "explicit extended partition",
			disk: func(t *testing.T) *memDisk {
				d := newDisk(64 * mib)
				d.write(t, 0, mbrSector(1, mbrPart{0, 0x05, 8192, 8192}))
				d.write(t, 8192*512, mbrSector(0, mbrPart{0, 0x83, 2048, 2048}))
				return d
			},
			choice: Choice{Part: 1}, err: ErrNoRoot, errHas: []string{"extended partition", "logical"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.disk(t)
			got, err := FindRoot(d, d.size, tc.choice)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("FindRoot = %+v, %v; want error %v", got, err, tc.err)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q\ndoes not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("FindRoot: %v", err)
			}
			gotPart := 0
			if got.Partition != nil {
				gotPart = got.Partition.Number
			}
			if gotPart != tc.wantPart || got.FS.Type != tc.wantFS || got.FS.Label != tc.wantLabel {
				t.Errorf("FindRoot = partition %d, %q %q (%s); want partition %d, %q %q",
					gotPart, got.FS.Type, got.FS.Label, got.Reason, tc.wantPart, tc.wantFS, tc.wantLabel)
			}
			if strings.Contains(got.Reason, "\n") || got.Reason == "" {
				t.Errorf("Reason %q is not one line", got.Reason)
			}
			for _, s := range tc.reasonHas {
				if !strings.Contains(got.Reason, s) {
					t.Errorf("Reason %q does not contain %q", got.Reason, s)
				}
			}
		})
	}
}

// TestFindRootReadsLittle checks that a DPS root costs the MBR, the GPT
// header, its entry array and one file system probe, and nothing of the
// other partitions.
func TestFindRootReadsLittle(t *testing.T) {
	parts := []part{{typ: TypeESP, fs: "fat"}}
	for i := 0; i < 6; i++ {
		parts = append(parts, part{typ: TypeLinuxData, fs: "ext4"})
	}
	parts = append(parts, part{typ: TypeRootX86_64, fs: "ext4", label: "root"})
	d := gptDisk(t, parts...)
	d.reads, d.readBytes = 0, 0
	r, err := FindRoot(d, d.size, Choice{})
	if err != nil || r.Partition == nil || r.Partition.Number != 8 {
		t.Fatalf("FindRoot = %+v, %v; want partition 8", r, err)
	}
	if d.reads > 4 || d.readBytes > 20<<10 {
		t.Errorf("FindRoot made %d reads of %d bytes, want at most 4 reads and 20 KiB", d.reads, d.readBytes)
	}
}

func TestHumanSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{512, "512 B"}, {8 * mib, "8 MiB"}, {3 * gib / 2, "1.5 GiB"}, {4 << 40, "4 TiB"}} {
		t.Run(tc.want, func(t *testing.T) {
			if got := humanSize(tc.n); got != tc.want {
				t.Errorf("humanSize(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}
