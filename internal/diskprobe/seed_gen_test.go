package diskprobe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFuzzSeeds writes the fuzz seed corpora under testdata/fuzz/
// when UPDATE_TESTDATA=1. The disks are tiny (a few sectors) so the seed
// files stay a few KiB.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("UPDATE_TESTDATA") != "1" {
		t.Skip("set UPDATE_TESTDATA=1 to rewrite the fuzz seeds")
	}
	// A 9-sector GPT with 4 entry slots: partition 1 (DPS root, 4 sectors
	// holding an ext4 superblock) and partition 3 (named, no-auto).
	gpt := func() *memDisk {
		d := newDisk(9 * 512)
		writeGPT(t, d, gptLayout{entries: 4, parts: []gptPart{
			{slot: 0, typ: TypeRootX86_64, uuid: uuid1, first: 3, last: 6, name: "root"},
			{slot: 2, typ: TypeLinuxData, uuid: uuid2, first: 3, last: 3, attrs: AttrNoAuto, name: "é"},
		}})
		d.write(t, 3*512, extSuperblock(t, "root", uuid3)[:1536])
		return d
	}
	backup := gpt()
	corrupt(t, backup, 512+40)
	// MBR: a primary at LBA 1, an extended partition over LBAs 2-5 with
	// two EBRs; with loop, the second links to itself.
	mbr := func(loop bool) *memDisk {
		d := newDisk(6 * 512)
		d.write(t, 0, mbrSector(0x1234abcd, mbrPart{0x80, 0x83, 1, 1}, mbrPart{0, 0x05, 2, 4}))
		d.write(t, 2*512, mbrSector(0, mbrPart{0, 0x83, 1, 1}, mbrPart{0, 0x05, 2, 2}))
		link := uint32(6)
		if loop {
			link = 2
		}
		d.write(t, 4*512, mbrSector(0, mbrPart{0, 0x83, 1, 1}, mbrPart{0, 0x05, link, 1}))
		return d
	}
	bareExt := newDisk(2048)
	putFS(t, bareExt, 0, "ext4", "bare", uuid1)

	write(t, "FuzzReadTable", map[string][]any{
		"gpt":        {gpt().bytes()},
		"gpt-backup": {backup.bytes()},
		"mbr-ebr":    {mbr(false).bytes()},
		"mbr-loop":   {mbr(true).bytes()},
		"fat":        {fatBootSector()},
	})
	write(t, "FuzzDetectFS", map[string][]any{
		"ext4":  {extSuperblock(t, "root", uuid1), []byte{}},
		"xfs":   {xfsSuperblock(t, "root", uuid2), []byte{}},
		"btrfs": {[]byte{}, btrfsSuperblock(t, "root", uuid3)[:btrfsLen]},
	})
	write(t, "FuzzFindRoot", map[string][]any{
		"gpt-auto":  {gpt().bytes(), ""},
		"gpt-label": {gpt().bytes(), "LABEL=root"},
		"mbr-part":  {mbr(false).bytes(), "5"},
		"mbr-uuid":  {mbr(true).bytes(), "PARTUUID=1234ABCD-01"},
		"bare-ext4": {bareExt.bytes(), ""},
	})
}

// write stores seeds in Go's corpus format, one value per line.
func write(t *testing.T, target string, seeds map[string][]any) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, vals := range seeds {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case string:
				fmt.Fprintf(&b, "string(%q)\n", v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
