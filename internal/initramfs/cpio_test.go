package initramfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func sampleArchive(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	w := NewCPIOWriter(&b)
	for _, err := range []error{
		w.Dir("bin", 0o755),
		w.File("/bin/busybox", 0o755, []byte("#!fake")), // leading slash is dropped
		w.Symlink("bin/sh", "busybox"),
		w.Dir("dev", 0o755),
		w.CharDev("dev/console", 0o600, 5, 1),
		w.File("etc-modules", 0o644, []byte("a\nbb\nccc\n")), // 9 bytes: padded
		w.File("empty", 0o644, nil),
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestCPIOWriterGolden(t *testing.T) {
	got := sampleArchive(t)
	if len(got)%4 != 0 {
		t.Errorf("archive length %d is not a multiple of 4", len(got))
	}
	golden := filepath.Join("testdata", "sample.cpio")
	if os.Getenv("UPDATE_TESTDATA") == "1" {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("archive differs from %s; if the change is intended, rerun with UPDATE_TESTDATA=1", golden)
	}
}

// TestCPIOWriterGNUcpio reads the archive back with GNU cpio, the same
// reader family as the kernel's.
func TestCPIOWriterGNUcpio(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatal("BOOTFLEET_CI=1 but cpio is not installed; run scripts/deps.sh")
		}
		t.Skip("cpio not installed")
	}
	arch := sampleArchive(t)
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(arch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	for _, want := range []string{
		"drwxr-xr-x   2 root     root            0 Jan  1  1970 bin",
		"-rwxr-xr-x   1 root     root            6 Jan  1  1970 bin/busybox",
		"lrwxrwxrwx   1 root     root            7 Jan  1  1970 bin/sh -> busybox",
		"crw-------   1 root     root       5,   1 Jan  1  1970 dev/console",
		"-rw-r--r--   1 root     root            9 Jan  1  1970 etc-modules",
		"-rw-r--r--   1 root     root            0 Jan  1  1970 empty",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cpio -itv output lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	cmd = exec.Command("cpio", "-id", "--quiet", "--no-absolute-filenames", "etc-modules", "bin/busybox")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc-modules")); string(b) != "a\nbb\nccc\n" {
		t.Errorf("extracted etc-modules = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bin/busybox")); string(b) != "#!fake" {
		t.Errorf("extracted bin/busybox = %q", b)
	}
}

func TestCPIOWriterRejects(t *testing.T) {
	w := NewCPIOWriter(&bytes.Buffer{})
	for _, name := range []string{"", "/", "TRAILER!!!", "a/../../b", "../x", "a\x00b"} {
		if err := w.File(name, 0o644, nil); err == nil {
			t.Errorf("File(%q): want an error", name)
		}
	}
	w.Close()
	if err := w.Dir("late", 0o755); err == nil {
		t.Error("Dir after Close: want an error")
	}
}
