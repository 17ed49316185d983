package fatimg

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// need finds a tool the tests read images back with; scripts/deps.sh
// installs them (mtools, dosfstools).
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatalf("BOOTFLEET_CI=1 but %s is missing; run scripts/deps.sh", tool)
		}
		t.Skipf("%s not found (run scripts/deps.sh)", tool)
	}
	return p
}

func writeImage(t *testing.T, files map[string][]byte) string {
	t.Helper()
	var list []File
	for p, b := range files {
		list = append(list, File{Path: p, Size: int64(len(b)), Content: bytes.NewReader(b)})
	}
	size, err := Size(list)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := Write(&buf, list)
	if err != nil {
		t.Fatal(err)
	}
	if n != size || int64(buf.Len()) != size {
		t.Fatalf("Write wrote %d bytes (buffer %d), Size said %d", n, buf.Len(), size)
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestReadBack: fsck.vfat finds nothing to fix, and mtools lists every
// file under its long name and reads back its exact bytes.
func TestReadBack(t *testing.T) {
	fsck, mcopy, mdir := need(t, "fsck.vfat"), need(t, "mcopy"), need(t, "mdir")
	files := map[string][]byte{
		"EFI/BOOT/BOOTAA64.EFI":           testutil.RandomBytes(1, 1<<20+17),
		"EFI/BOOT/grubaa64.efi":           testutil.RandomBytes(2, 3<<20),
		"EFI/debian/grub.cfg":             []byte("linux /vmlinuz\ninitrd /initrd.img-6.1.0-28-arm64\nboot\n"),
		"vmlinuz":                         testutil.RandomBytes(3, 9<<20+511),
		"initrd.img-6.1.0-28-arm64":       testutil.RandomBytes(4, 2<<20+1),
		"initrd.img-6.1.0-28-arm64.extra": testutil.RandomBytes(5, 4097),
		"empty":                           nil,
		"A Long Name With Spaces.txt":     []byte("x"),
	}
	img := writeImage(t, files)
	if out, err := exec.Command(fsck, "-n", "-v", img).CombinedOutput(); err != nil {
		t.Fatalf("fsck.vfat -n: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "16 bit entries") {
		t.Errorf("fsck.vfat does not see 16-bit FAT entries:\n%s", out)
	}
	out, err := exec.Command(mdir, "-i", img, "-/", "-b", "::/").CombinedOutput()
	if err != nil {
		t.Fatalf("mdir: %v\n%s", err, out)
	}
	for p := range files {
		if !strings.Contains(string(out), "::/"+p+"\n") {
			t.Errorf("mdir does not list ::/%s:\n%s", p, out)
		}
	}
	dst := t.TempDir()
	for p, want := range files {
		got := filepath.Join(dst, strings.ReplaceAll(p, "/", "_"))
		if out, err := exec.Command(mcopy, "-n", "-i", img, "::/"+p, got).CombinedOutput(); err != nil {
			t.Fatalf("mcopy ::/%s: %v\n%s", p, err, out)
		}
		b, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s: read back %d bytes that differ from the %d written", p, len(b), len(want))
		}
	}
}

// TestSmallAndLarge: a tiny image is still FAT16 (padded to 4085
// clusters), and clusters grow with the content.
func TestSmallAndLarge(t *testing.T) {
	fsck := need(t, "fsck.vfat")
	img := writeImage(t, map[string][]byte{"GRUB.CFG": []byte("boot\n")})
	if out, err := exec.Command(fsck, "-n", "-v", img).CombinedOutput(); err != nil || !strings.Contains(string(out), "16 bit entries") {
		t.Fatalf("fsck.vfat -n of a one-file image: %v\n%s", err, out)
	}
	l, err := plan([]File{{Path: "big", Size: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if l.spc != 64 || l.clusters < minClusters || l.clusters > maxClusters {
		t.Errorf("1 GiB file: %d sectors per cluster, %d clusters; want 64 and a FAT16 count", l.spc, l.clusters)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		files []File
		want  string
	}{
		{[]File{{Path: ""}}, "want a path inside the image"},
		{[]File{{Path: "../x"}}, "want a path inside the image"},
		{[]File{{Path: "a:b"}}, "not allowed"},
		{[]File{{Path: "x", Size: -1}}, "size -1"},
		{[]File{{Path: "Grub.cfg"}, {Path: "GRUB.CFG"}}, "already in the image"},
		{[]File{{Path: "f"}, {Path: "f/g"}}, "already in the image"},
	} {
		if _, err := Size(tc.files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Size(%+v) = %v, want an error with %q", tc.files, err, tc.want)
		}
	}
	if _, err := Size([]File{{Path: "a", Size: 1 << 31}, {Path: "b", Size: 1 << 31}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("4 GiB of files: %v, want ErrTooLarge", err)
	}
	var buf bytes.Buffer
	_, err := Write(&buf, []File{{Path: "short", Size: 10, Content: strings.NewReader("abc")}})
	if err == nil || !strings.Contains(err.Error(), "read 3 of its 10 bytes") {
		t.Errorf("short content: %v, want an error saying 3 of 10 bytes", err)
	}
}

// TestDeterministic: the same files give the same bytes, so an image can
// be cached under a hash of its inputs.
func TestDeterministic(t *testing.T) {
	mk := func() []byte {
		var buf bytes.Buffer
		if _, err := Write(&buf, []File{{Path: "EFI/BOOT/BOOTAA64.EFI", Size: 3, Content: strings.NewReader("abc")}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if !bytes.Equal(mk(), mk()) {
		t.Error("two images of the same files differ")
	}
}
