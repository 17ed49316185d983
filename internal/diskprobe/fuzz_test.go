package diskprobe

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
)

// Seeds live in testdata/fuzz/<FuzzName>/ and are written by
// TestWriteFuzzSeeds (UPDATE_TESTDATA=1): small GPTs and MBRs, bare
// superblocks, a FAT boot sector and a looping EBR chain.

var canonicalGUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkTable states what every decoded table promises, whatever the input.
func checkTable(t *testing.T, tab Table, size int64) {
	switch {
	case tab.Scheme == "gpt" && (tab.SectorSize == 512 || tab.SectorSize == 4096):
	case tab.Scheme == "mbr" && tab.SectorSize == 512:
	default:
		t.Fatalf("table %q with %d-byte sectors", tab.Scheme, tab.SectorSize)
	}
	if len(tab.Partitions) > maxGPTEntries+4+maxLogical+4 {
		t.Fatalf("%d partitions, beyond every bound", len(tab.Partitions))
	}
	seen := map[int]bool{}
	for _, p := range tab.Partitions {
		if p.Number < 1 || seen[p.Number] {
			t.Fatalf("partition number %d is invalid or repeated", p.Number)
		}
		seen[p.Number] = true
		if p.Start < 0 || p.Size <= 0 || p.Start > size || p.Size > size-p.Start {
			t.Fatalf("partition %d (start %d, size %d) does not fit a %d-byte device", p.Number, p.Start, p.Size, size)
		}
		if tab.Scheme == "gpt" && (!canonicalGUID.MatchString(p.Type) || !canonicalGUID.MatchString(p.PartUUID) || p.Number > maxGPTEntries) {
			t.Fatalf("GPT partition %+v", p)
		}
	}
}

func FuzzReadTable(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		tab, err := ReadTable(bytes.NewReader(data), size)
		if err != nil {
			return
		}
		checkTable(t, tab, size)
	})
}

// twoPiece is a device holding head at 0 and sb at 64 KiB (the btrfs
// superblock), zeros elsewhere: it lets fuzz inputs stay small.
type twoPiece struct{ head, sb []byte }

func (d twoPiece) ReadAt(p []byte, off int64) (int, error) {
	size := int64(btrfsOff + len(d.sb))
	if off >= size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), size-off)
	clear(p[:n])
	for i := int64(0); i < n; i++ {
		switch at := off + i; {
		case at < int64(len(d.head)) && at < btrfsOff:
			p[i] = d.head[at]
		case at >= btrfsOff:
			p[i] = d.sb[at-btrfsOff]
		}
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func FuzzDetectFS(f *testing.F) {
	f.Fuzz(func(t *testing.T, head, sb []byte) {
		fs, err := DetectFS(twoPiece{head, sb})
		if err != nil {
			if fs != (FS{}) {
				t.Fatalf("DetectFS = %+v with error %v", fs, err)
			}
			return
		}
		if fs.Type != "ext4" && fs.Type != "xfs" && fs.Type != "btrfs" || !canonicalGUID.MatchString(fs.UUID) ||
			strings.ContainsRune(fs.Label, 0) || len(fs.Label) > 256 {
			t.Fatalf("DetectFS = %+v", fs)
		}
	})
}

func FuzzFindRoot(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, choice string) {
		c, err := ParseChoice(choice)
		if err != nil {
			c = Choice{}
		}
		size := int64(len(data))
		r, err := FindRoot(bytes.NewReader(data), size, c)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if p := r.Partition; p != nil && (p.Start < 0 || p.Size <= 0 || p.Start+p.Size > size) {
			t.Fatalf("root partition %+v outside a %d-byte device", p, size)
		}
		if r.Reason == "" || strings.ContainsAny(r.Reason, "\n\r") && !strings.ContainsAny(choice, "\n\r") {
			t.Fatalf("Reason %q is not one line", r.Reason)
		}
	})
}
