package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestImport(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("bootfleet"), 10000)
	want := sha256.Sum256(content)
	tests := []struct {
		name    string
		r       io.Reader
		wantErr string
	}{
		{"new", bytes.NewReader(content), ""},
		{"again", bytes.NewReader(content), ""},
		{"empty", strings.NewReader(""), "empty"},
		{"broken upload", io.MultiReader(bytes.NewReader(content[:100]), errReader{}), "after 100 bytes"},
		{"broken after the header", io.MultiReader(bytes.NewReader(content[:5000]), errReader{}), "after 5000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, size, err := s.Import(tt.r)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sum != hex.EncodeToString(want[:]) || size != int64(len(content)) {
				t.Fatalf("got %s %d, want %x %d", sum, size, want, len(content))
			}
			p, _ := s.Path(sum)
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("stored content differs (%v)", err)
			}
		})
	}
	noTemporaries(t, data)
	sum := hex.EncodeToString(want[:])
	if err := s.Remove(sum); err != nil || s.Has(sum) {
		t.Fatalf("Remove: %v, still there: %v", err, s.Has(sum))
	}
	if _, err := s.Path("../../etc/passwd"); !errors.Is(err, ErrBadHash) {
		t.Fatalf("Path of a bad hash: %v, want ErrBadHash", err)
	}
}

// TestImportRawSparse: a 64 MiB disk with 1 MiB of data at two places
// takes about 2 MiB, and its hash is that of all its bytes.
func TestImportRawSparse(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	disk := make([]byte, 64<<20)
	for _, off := range []int{0, 40<<20 + 1234} { // one aligned, one not
		for i := range 1 << 20 {
			disk[off+i] = byte(i*7 + 1)
		}
	}
	want := sha256.Sum256(disk)
	res, err := s.ImportContext(context.Background(), bytes.NewReader(disk))
	if err != nil {
		t.Fatal(err)
	}
	if res.SHA256 != hex.EncodeToString(want[:]) || res.Size != int64(len(disk)) || res.Received != int64(len(disk)) || res.Format != Raw {
		t.Fatalf("got %+v, want sha256 %x of %d bytes, raw", res, want, len(disk))
	}
	p, _ := s.Path(res.SHA256)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if a := allocated(st); a != res.Allocated || a > 3<<20 {
		t.Fatalf("stored file takes %d bytes on disk (reported %d), want at most 3 MiB of its %d", a, res.Allocated, st.Size())
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, disk) {
		t.Fatalf("stored content differs (%v)", err)
	}
	if st.Mode().Perm() != 0o440 {
		t.Fatalf("stored file mode %v, want read-only 0440", st.Mode().Perm())
	}
	noTemporaries(t, data)
}

// TestImportNeedsQemuImg: a qcow2 upload on a server without qemu-img is
// refused with the package to install, and leaves nothing behind.
func TestImportNeedsQemuImg(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	s.qemuImg = "qemu-img-not-installed"
	h := header("QFI\xfb", be32(4, 3))
	res, err := s.ImportContext(context.Background(), bytes.NewReader(append(h, make([]byte, 1<<20)...)))
	if !errors.Is(err, ErrNoQemuImg) || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "apt-get install qemu-utils") {
		t.Fatalf("err %v, want ErrNoQemuImg saying to install qemu-utils", err)
	}
	if res.Format != QCOW2 || res.Received != int64(len(h))+1<<20 {
		t.Fatalf("got %+v, want format qcow2 and all bytes received", res)
	}
	noTemporaries(t, data)
	noBlobs(t, data)
}

// TestImportCancelStopsQemuImg: cancelling the upload's context stops a
// conversion in progress and removes its files.
func TestImportCancelStopsQemuImg(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	s.qemuImg = filepath.Join(t.TempDir(), "qemu-img")
	if err := os.WriteFile(s.qemuImg, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = s.ImportContext(ctx, bytes.NewReader(header("vhdxfile")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("import took %v after the cancel; qemu-img was not stopped", d)
	}
	noTemporaries(t, data)
	noBlobs(t, data)
}

func noTemporaries(t *testing.T, data string) {
	t.Helper()
	if tmps, _ := os.ReadDir(filepath.Join(data, "images", "tmp")); len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

func noBlobs(t *testing.T, data string) {
	t.Helper()
	if blobs, _ := os.ReadDir(filepath.Join(data, "images", "sha256")); len(blobs) != 0 {
		t.Fatalf("content stored: %v", blobs)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
