package diskprobe

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

const (
	espUUID   = "c0ffee00-1111-2222-3333-444455556666"
	extUUID   = "2f8a7c5e-0b1d-4e6f-9a3b-5c7d9e1f2a4b"
	xfsUUID   = "11223344-5566-4788-99aa-bbccddeeff00"
	btrfsUUID = "8e0f2a4c-6d1b-4a3e-8f5c-7b9d1e3f5a70"
	rootUUID  = "5a5a5a5a-0000-4111-8222-333344445555"
)

// mkfsAt makes an ext4 file system of size bytes at byte off of img.
func mkfsAt(t *testing.T, img string, off, size int64, label, uuid string) {
	run(t, "", "mkfs.ext4", "-q", "-F", "-L", label, "-U", uuid,
		"-E", "nodiscard,offset="+strconv.FormatInt(off, 10), img, strconv.FormatInt(size/1024, 10)+"k")
}

// TestInteropGPT partitions a 1 GiB image with sfdisk: an ESP with FAT, a
// swap partition, ext4, an empty slot 4, XFS, a no-auto DPS root with
// btrfs and a DPS root with ext4.
func TestInteropGPT(t *testing.T) {
	needTools(t, "sfdisk", "partx", "blkid", "mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "mkfs.vfat", "mkswap")
	img := sparseFile(t, "disk.img", 1*gib)
	run(t, strings.ReplaceAll(`label: gpt
label-id: 01234567-89AB-CDEF-0123-456789ABCDEF
IMG1 : size=16M, type=U, name="EFI system", uuid=C0FFEE00-1111-2222-3333-444455556666
IMG2 : size=16M, type=S
IMG3 : size=32M, type=L, name="données"
IMG5 : size=310M, type=L, name="xfs"
IMG6 : size=130M, type=4f68bce3-e8cd-4db1-96e7-fbcaf984b709, name="old root", attrs="GUID:63"
IMG7 : size=64M, type=4f68bce3-e8cd-4db1-96e7-fbcaf984b709, name="root", attrs="RequiredPartition GUID:60", uuid=`+rootUUID+`
`, "IMG", img), "sfdisk", "-q", img)

	f, size := openImage(t, img)
	table, err := ReadTable(f, size)
	if err != nil {
		t.Fatalf("ReadTable: %v", err)
	}
	checkTableAgainstSfdisk(t, img, table)
	// The GUIDs we chose, read back: a mixed-endian slip would show here.
	if table.ID != "01234567-89ab-cdef-0123-456789abcdef" || table.Partitions[0].PartUUID != espUUID || table.Partitions[5].PartUUID != rootUUID {
		t.Errorf("disk GUID %s, PARTUUIDs %s and %s; want the ones given to sfdisk", table.ID, table.Partitions[0].PartUUID, table.Partitions[5].PartUUID)
	}
	if a := table.Partitions[4].Attributes; a != AttrNoAuto {
		t.Errorf("partition 6 attributes 0x%x, want no-auto 0x%x", a, AttrNoAuto)
	}
	byNum := map[int]Partition{}
	for _, p := range table.Partitions {
		byNum[p.Number] = p
	}

	p := byNum[1]
	run(t, "", "mkfs.vfat", "-F", "16", "-n", "ESP", "--offset="+strconv.FormatInt(p.Start/512, 10), img, strconv.FormatInt(p.Size/1024, 10))
	copyInto(t, img, byNum[2].Start, mkfs(t, "swap", "swp", extUUID, byNum[2].Size))
	mkfsAt(t, img, byNum[3].Start, byNum[3].Size, "data", extUUID)
	copyInto(t, img, byNum[5].Start, mkfs(t, "xfs", "xfsdata", xfsUUID, 300*mib))
	copyInto(t, img, byNum[6].Start, mkfs(t, "btrfs", "oldroot", btrfsUUID, 128*mib))
	mkfsAt(t, img, byNum[7].Start, byNum[7].Size, "sysroot", rootUUID)

	want := map[int]FS{
		3: {Type: "ext4", Label: "data", UUID: extUUID},
		5: {Type: "xfs", Label: "xfsdata", UUID: xfsUUID},
		6: {Type: "btrfs", Label: "oldroot", UUID: btrfsUUID},
		7: {Type: "ext4", Label: "sysroot", UUID: rootUUID},
	}
	for _, p := range table.Partitions {
		t.Run("fs "+strconv.Itoa(p.Number), func(t *testing.T) {
			if got := checkFS(t, img, p.Start, p.Size); got != want[p.Number] {
				t.Errorf("DetectFS = %+v, want %+v (from the mkfs options)", got, want[p.Number])
			}
		})
	}

	for _, tc := range []struct {
		choice Choice
		want   int
	}{
		{Choice{}, 7},
		{Choice{Label: "xfsdata"}, 5},
		{Choice{Label: "old root"}, 6},
		{Choice{PartUUID: strings.ToUpper(byNum[3].PartUUID)}, 3},
		{Choice{Part: 2}, 2},
	} {
		t.Run("FindRoot "+tc.choice.String(), func(t *testing.T) {
			r, err := FindRoot(f, size, tc.choice)
			if err != nil || r.Partition == nil || r.Partition.Number != tc.want || r.FS != want[tc.want] {
				t.Fatalf("FindRoot = %+v, %v; want partition %d with %+v", r, err, tc.want, want[tc.want])
			}
		})
	}

	t.Run("primary header destroyed", func(t *testing.T) {
		w, err := os.OpenFile(img, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.WriteAt(make([]byte, 512), 512)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadTable(f, size)
		if err != nil {
			t.Fatalf("ReadTable: %v", err)
		}
		if len(got.Partitions) != len(table.Partitions) {
			t.Fatalf("backup table has %d partitions, primary had %d", len(got.Partitions), len(table.Partitions))
		}
		for i := range got.Partitions {
			if got.Partitions[i] != table.Partitions[i] {
				t.Errorf("backup partition %+v, primary had %+v", got.Partitions[i], table.Partitions[i])
			}
		}
	})
}

// TestInteropGPT4096 makes a GPT for 4096-byte sectors with fdisk -b 4096
// and checks it against partx -S 4096.
func TestInteropGPT4096(t *testing.T) {
	needTools(t, "fdisk", "partx", "blkid", "mkfs.ext4")
	img := sparseFile(t, "disk4k.img", 128*mib)
	// g: new GPT; n, n: two partitions (the first 8 MiB); w: write.
	run(t, "g\nn\n\n\n+8M\nn\n\n\n\nw\n", "fdisk", "-b", "4096", img)
	f, size := openImage(t, img)
	table, err := ReadTable(f, size)
	if err != nil {
		t.Fatalf("ReadTable: %v", err)
	}
	px := partx(t, img, 4096)
	if table.SectorSize != 4096 || len(table.Partitions) != 2 || len(px) != 2 {
		t.Fatalf("table %+v; partx says %v", table, px)
	}
	for i, p := range table.Partitions {
		start, _ := strconv.ParseInt(px[i]["START"], 10, 64) // partx counts 512-byte sectors
		sectors, _ := strconv.ParseInt(px[i]["SECTORS"], 10, 64)
		if strconv.Itoa(p.Number) != px[i]["NR"] || p.Start != start*512 || p.Size != sectors*512 || p.Type != px[i]["TYPE"] || p.PartUUID != px[i]["UUID"] {
			t.Errorf("partition %+v; partx says %v", p, px[i])
		}
	}
	p2 := table.Partitions[1]
	mkfsAt(t, img, p2.Start, p2.Size, "root4k", rootUUID)
	checkFS(t, img, p2.Start, p2.Size)
	r, err := FindRoot(f, size, Choice{})
	if err != nil || r.Partition == nil || r.Partition.Number != 2 || r.FS.Label != "root4k" {
		t.Fatalf("FindRoot = %+v, %v; want partition 2 (root4k)", r, err)
	}
}

// TestInteropMBR makes an MBR with sfdisk: FAT32, an extended partition
// holding swap, ext4 and an empty logical partition.
func TestInteropMBR(t *testing.T) {
	needTools(t, "sfdisk", "partx", "blkid", "mkfs.ext4", "mkfs.vfat", "mkswap")
	img := sparseFile(t, "mbr.img", 256*mib)
	run(t, `label: dos
label-id: 0x1234abcd
size=32M, type=c, bootable
type=5
size=16M, type=82
size=64M, type=83
size=16M, type=83
`, "sfdisk", "-q", img)
	f, size := openImage(t, img)
	table, err := ReadTable(f, size)
	if err != nil {
		t.Fatalf("ReadTable: %v", err)
	}
	checkTableAgainstSfdisk(t, img, table)
	byNum := map[int]Partition{}
	for _, p := range table.Partitions {
		byNum[p.Number] = p
	}
	if byNum[6].PartUUID != "1234abcd-06" {
		t.Errorf("partition 6 PARTUUID %q, want 1234abcd-06", byNum[6].PartUUID)
	}
	run(t, "", "mkfs.vfat", "-F", "32", "--offset="+strconv.FormatInt(byNum[1].Start/512, 10), img, strconv.FormatInt(byNum[1].Size/1024, 10))
	copyInto(t, img, byNum[5].Start, mkfs(t, "swap", "swp", extUUID, byNum[5].Size))
	mkfsAt(t, img, byNum[6].Start, byNum[6].Size, "mbrroot", rootUUID)
	for _, n := range []int{1, 5, 6, 7} {
		checkFS(t, img, byNum[n].Start, byNum[n].Size)
	}
	r, err := FindRoot(f, size, Choice{})
	if err != nil || r.Partition == nil || r.Partition.Number != 6 || r.FS.Label != "mbrroot" {
		t.Fatalf("FindRoot = %+v, %v; want partition 6 (mbrroot)", r, err)
	}
	r, err = FindRoot(f, size, Choice{PartUUID: "1234ABCD-07"})
	if err != nil || r.Partition == nil || r.Partition.Number != 7 || r.FS.Type != "" || !strings.Contains(r.Reason, "anyway") {
		t.Fatalf("FindRoot(PARTUUID=1234ABCD-07) = %+v, %v; want partition 7 with no file system", r, err)
	}
}

// TestInteropBareFS puts file systems on whole images, with no table.
func TestInteropBareFS(t *testing.T) {
	needTools(t, "blkid", "mkfs.ext4", "mkfs.ext2", "mkfs.xfs", "mkfs.btrfs", "mkfs.vfat")
	for _, tc := range []struct {
		typ  string
		size int64
		want FS
	}{
		{"ext4", 16 * mib, FS{Type: "ext4", Label: "bare-ext4", UUID: extUUID}},
		{"ext2", 16 * mib, FS{Type: "ext4", Label: "bare-ext2", UUID: extUUID}},
		{"xfs", 300 * mib, FS{Type: "xfs", Label: "bare-xfs", UUID: xfsUUID}},
		{"btrfs", 128 * mib, FS{Type: "btrfs", Label: "bare-btrfs", UUID: btrfsUUID}},
		{"vfat", 64 * mib, FS{}}, // a FAT boot sector ends in 0x55aa too
	} {
		t.Run(tc.typ, func(t *testing.T) {
			needTools(t, "mkfs."+tc.typ)
			img := mkfs(t, tc.typ, "bare-"+tc.typ, tc.want.UUID, tc.size)
			f, size := openImage(t, img)
			if _, err := ReadTable(f, size); !errors.Is(err, ErrNoTable) {
				t.Errorf("ReadTable = %v, want ErrNoTable", err)
			}
			if got := checkFS(t, img, 0, size); got != tc.want {
				t.Errorf("DetectFS = %+v, want %+v (from the mkfs options)", got, tc.want)
			}
			r, err := FindRoot(io.NewSectionReader(f, 0, size), size, Choice{})
			if tc.want.Type == "" {
				if !errors.Is(err, ErrNoRoot) {
					t.Errorf("FindRoot = %+v, %v; want ErrNoRoot", r, err)
				}
				return
			}
			if err != nil || r.Partition != nil || r.FS != tc.want {
				t.Errorf("FindRoot = %+v, %v; want the whole device with %+v", r, err, tc.want)
			}
		})
	}
}
