package diskprobe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Interop tests: images partitioned by util-linux (sfdisk, fdisk) with
// file systems made by mkfs.ext4, mkfs.xfs, mkfs.btrfs, mkfs.vfat and
// mkswap, checked against sfdisk --json, partx and blkid -p. They need no
// root: everything is a sparse file in t.TempDir().

// needTools skips without the tools, except in CI (BOOTFLEET_CI=1), where
// scripts/deps.sh installs fdisk, e2fsprogs, xfsprogs, btrfs-progs and
// dosfstools and a missing tool is a failure.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("BOOTFLEET_CI") == "1" {
				t.Fatalf("BOOTFLEET_CI=1 but %s is not installed; run scripts/deps.sh", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
}

func run(t *testing.T, stdin string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// sparseFile makes an empty sparse file of size bytes.
func sparseFile(t *testing.T, name string, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyInto copies the file src into dst at off, skipping zero blocks so
// that dst stays sparse.
func copyInto(t *testing.T, dst string, off int64, src string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, 1<<20)
	for pos := int64(0); ; {
		n, err := io.ReadFull(in, buf)
		if n > 0 && !isZero(buf[:n]) {
			if _, werr := out.WriteAt(buf[:n], off+pos); werr != nil {
				t.Fatal(werr)
			}
		}
		pos += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// mkfs makes a file system of typ on a new sparse file and returns it.
func mkfs(t *testing.T, typ, label, uuid string, size int64) string {
	t.Helper()
	img := sparseFile(t, typ+".img", size)
	switch typ {
	case "ext4", "ext2", "ext3":
		run(t, "", "mkfs."+typ, "-q", "-F", "-L", label, "-U", uuid, img)
	case "xfs":
		run(t, "", "mkfs.xfs", "-q", "-L", label, "-m", "uuid="+uuid, img)
	case "btrfs":
		run(t, "", "mkfs.btrfs", "-q", "-L", label, "-U", uuid, img)
	case "vfat":
		run(t, "", "mkfs.vfat", "-n", label, img)
	case "swap":
		run(t, "", "mkswap", "-L", label, "-U", uuid, img)
	default:
		t.Fatalf("mkfs: unknown type %q", typ)
	}
	return img
}

// blkid probes size bytes at off of img, as blkid -p sees them; an empty
// map when blkid finds nothing.
func blkid(t *testing.T, img string, off, size int64) map[string]string {
	t.Helper()
	cmd := exec.Command("blkid", "-p", "-o", "export", "-O", strconv.FormatInt(off, 10), "-S", strconv.FormatInt(size, 10), img)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 { // nothing found
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("blkid: %v", err)
	}
	return parseExport(out)
}

// parseExport reads KEY=value lines (blkid -o export) or KEY="value"
// pairs (partx -P).
func parseExport(out []byte) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

// partx lists img's partitions as partx -P does, one map per line; names
// holding spaces are not supported.
func partx(t *testing.T, img string, sectorSize int) []map[string]string {
	t.Helper()
	out := run(t, "", "partx", "-S", strconv.Itoa(sectorSize), "-P", "-o", "NR,START,SECTORS,TYPE,UUID,FLAGS", img)
	var rows []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		rows = append(rows, parseExport(sc.Bytes()))
	}
	return rows
}

type sfdiskJSON struct {
	Table struct {
		Label      string `json:"label"`
		ID         string `json:"id"`
		SectorSize int    `json:"sectorsize"`
		Partitions []struct {
			Node  string `json:"node"`
			Start int64  `json:"start"`
			Size  int64  `json:"size"`
			Type  string `json:"type"`
			UUID  string `json:"uuid"`
			Name  string `json:"name"`
		} `json:"partitions"`
	} `json:"partitiontable"`
}

func sfdisk(t *testing.T, img string) sfdiskJSON {
	t.Helper()
	var s sfdiskJSON
	if err := json.Unmarshal(run(t, "", "sfdisk", "--json", img), &s); err != nil {
		t.Fatalf("sfdisk --json: %v", err)
	}
	return s
}

func openImage(t *testing.T, img string) (*os.File, int64) {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return f, st.Size()
}

// checkTableAgainstSfdisk compares ReadTable's partitions with sfdisk's
// (number, start, size, type, and on GPT the PARTUUID and name) and with
// partx's PARTUUIDs and attribute bits.
func checkTableAgainstSfdisk(t *testing.T, img string, got Table) {
	t.Helper()
	s := sfdisk(t, img)
	if want := map[string]string{"gpt": "gpt", "dos": "mbr"}[s.Table.Label]; got.Scheme != want || got.SectorSize != s.Table.SectorSize {
		t.Errorf("table %s with %d-byte sectors, sfdisk says %s with %d", got.Scheme, got.SectorSize, s.Table.Label, s.Table.SectorSize)
	}
	if want := strings.TrimPrefix(strings.ToLower(s.Table.ID), "0x"); got.ID != want {
		t.Errorf("table ID %s, sfdisk says %s", got.ID, want)
	}
	if len(got.Partitions) != len(s.Table.Partitions) {
		t.Fatalf("%d partitions, sfdisk lists %d: %+v", len(got.Partitions), len(s.Table.Partitions), s.Table.Partitions)
	}
	px := partx(t, img, 512)
	for i, sp := range s.Table.Partitions {
		g := got.Partitions[i]
		num, _ := strconv.Atoi(strings.TrimPrefix(sp.Node, img))
		wantType := strings.ToLower(sp.Type)
		if got.Scheme == "mbr" {
			b, _ := strconv.ParseUint(sp.Type, 16, 8)
			wantType = fmt.Sprintf("0x%02x", b)
		}
		if g.Number != num || g.Start != sp.Start*512 || g.Size != sp.Size*512 || g.Type != wantType {
			t.Errorf("partition %d: number %d, start %d, size %d, type %s; sfdisk says %d, %d, %d, %s",
				i, g.Number, g.Start, g.Size, g.Type, num, sp.Start*512, sp.Size*512, wantType)
		}
		if got.Scheme == "gpt" && (g.PartUUID != strings.ToLower(sp.UUID) || g.Name != sp.Name) {
			t.Errorf("partition %d: PARTUUID %s, name %q; sfdisk says %s, %q", g.Number, g.PartUUID, g.Name, strings.ToLower(sp.UUID), sp.Name)
		}
		flagsDiffer := got.Scheme == "gpt" && px[i]["FLAGS"] != fmt.Sprintf("0x%x", g.Attributes)
		if px[i]["NR"] != strconv.Itoa(g.Number) || px[i]["UUID"] != g.PartUUID || flagsDiffer {
			t.Errorf("partition %d: PARTUUID %s, attributes 0x%x; partx says %v", g.Number, g.PartUUID, g.Attributes, px[i])
		}
	}
}

// checkFS compares DetectFS on a byte range of img with blkid -p on the
// same range.
func checkFS(t *testing.T, img string, off, size int64) FS {
	t.Helper()
	f, _ := openImage(t, img)
	got, err := DetectFS(io.NewSectionReader(f, off, size))
	b := blkid(t, img, off, size)
	want := FS{Type: b["TYPE"], Label: b["LABEL"], UUID: b["UUID"]}
	switch want.Type {
	case "ext2", "ext3", "ext4":
		want.Type = "ext4"
	case "xfs", "btrfs":
	default:
		if !errors.Is(err, ErrNoFS) {
			t.Errorf("DetectFS at %d = %+v, %v; blkid says %v, want ErrNoFS", off, got, err, b)
		}
		return FS{}
	}
	if err != nil || got != want {
		t.Errorf("DetectFS at %d = %+v, %v; blkid says %+v", off, got, err, want)
	}
	return got
}
