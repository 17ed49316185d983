package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needQemuImg skips without qemu-img, except in CI (BOOTFLEET_CI=1),
// where scripts/deps.sh must have installed qemu-utils.
func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatal("BOOTFLEET_CI=1 but qemu-img is not installed; run scripts/deps.sh")
		}
		t.Skip("qemu-img not installed (apt-get install qemu-utils)")
	}
}

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// rawDisk writes a 1 GiB sparse raw disk holding about 2 MiB of known
// data, aligned and not, up to its last byte, and returns its path and
// hex sha256.
func rawDisk(t *testing.T, dir string) (string, string) {
	t.Helper()
	path := filepath.Join(dir, "disk.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i*13 + i>>12 + 1)
	}
	for _, off := range []int64{0, 513<<20 + 3*4096 + 7, 1<<30 - 64<<10} {
		n := min(int64(len(chunk)), 1<<30-off)
		if _, err := f.WriteAt(chunk[:n], off); err != nil {
			t.Fatal(err)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// TestImportConvertsWithQemuImg: images qemu-img made from a raw disk
// import as that raw disk: same sha256, same size, and sparse.
func TestImportConvertsWithQemuImg(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	raw, want := rawDisk(t, dir)
	tests := []struct {
		name   string
		format Format
		opts   []string // for qemu-img convert
	}{
		{"qcow2", QCOW2, []string{"-O", "qcow2"}},
		{"qcow2 compat 0.10", QCOW2, []string{"-O", "qcow2", "-o", "compat=0.10"}},
		{"qcow2 compressed", QCOW2, []string{"-O", "qcow2", "-c"}},
		{"qcow", QCOW, []string{"-O", "qcow"}},
		{"vmdk monolithicSparse", VMDK, []string{"-O", "vmdk", "-o", "subformat=monolithicSparse"}},
		{"vmdk streamOptimized", VMDK, []string{"-O", "vmdk", "-o", "subformat=streamOptimized"}},
		{"vhdx", VHDX, []string{"-O", "vhdx"}},
		{"vhd dynamic", VPC, []string{"-O", "vpc", "-o", "subformat=dynamic,force_size=on"}},
		{"vdi", VDI, []string{"-O", "vdi"}},
		{"raw", Raw, []string{"-O", "raw"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			s, err := Open(data)
			if err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(dir, "img"+string(rune('a'+i)))
			qemuImg(t, append(append([]string{"convert", "-f", "raw"}, tt.opts...), raw, img)...)
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			res, err := s.ImportContext(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != tt.format || res.SHA256 != want || res.Size != 1<<30 || res.Received != st.Size() {
				t.Fatalf("got %+v, want format %v, sha256 %s, size 1 GiB, %d bytes received", res, tt.format, want, st.Size())
			}
			if res.Allocated > 8<<20 {
				t.Fatalf("stored image takes %d bytes on disk, want a few MiB: not sparse", res.Allocated)
			}
			p, _ := s.Path(res.SHA256)
			if got, err := os.Stat(p); err != nil || got.Size() != 1<<30 {
				t.Fatalf("stored file: %v, %v", got, err)
			}
			noTemporaries(t, data)
		})
	}
}

// TestImportRefusesExternalFiles: an image naming another file is refused
// with what to do, and leaves nothing in tmp/ or sha256/. Some are refused
// from their header, others by qemu-img info.
func TestImportRefusesExternalFiles(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, "convert", "-f", "raw", "-O", "vmdk", base, filepath.Join(dir, "base.vmdk"))
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", base, filepath.Join(dir, "good.qcow2"))
	damaged, err := os.ReadFile(filepath.Join(dir, "good.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    []string // qemu-img arguments making dir/<name>
		content []byte   // or the content
		wantErr error
		msg     string
	}{
		{"top.qcow2", []string{"create", "-q", "-f", "qcow2", "-b", base, "-F", "raw"}, nil, ErrExternalFile,
			"qcow2 image has a backing file, which is not uploaded; merge it into one image first: qemu-img convert -O qcow2"},
		{"data-file.qcow2", []string{"create", "-q", "-f", "qcow2", "-o", "data_file=" + base, "-o", "data_file_raw=on"}, nil, ErrExternalFile,
			"external data file"},
		{"desc.vmdk", []string{"convert", "-f", "raw", "-O", "vmdk", "-o", "subformat=monolithicFlat", base}, nil, ErrExternalFile,
			"VMDK descriptor file: its data is in the extent files it names, which are not uploaded; convert it to a single file first: qemu-img convert -O vmdk -o subformat=monolithicSparse"},
		{"child.vmdk", []string{"create", "-q", "-f", "vmdk", "-b", filepath.Join(dir, "base.vmdk"), "-F", "vmdk"}, nil, ErrExternalFile,
			`vmdk image has a backing file ("` + filepath.Join(dir, "base.vmdk") + `"), which is not uploaded`},
		{"cut.qcow2", nil, damaged[:HeaderSize], ErrBadImage, "qcow2 image is damaged (fetch it again, or repair a copy with qemu-img check -r all): ERROR"},
		{"garbage.vhdx", nil, append([]byte("vhdxfile"), make([]byte, 1<<20)...), ErrBadImage, "qemu-img cannot read the vhdx image: qemu-img: Could not open 'the upload'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			s, err := Open(data)
			if err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(dir, tt.name)
			if tt.make != nil {
				args := append(append([]string(nil), tt.make...), img)
				if tt.make[0] == "create" {
					args = append(args, "1M")
				}
				qemuImg(t, args...)
			} else if err := os.WriteFile(img, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = s.ImportContext(context.Background(), f)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %v, want %q saying %q", err, tt.wantErr, tt.msg)
			}
			if strings.Contains(err.Error(), filepath.Join(data, "images")) {
				t.Fatalf("err %q names the server's temporary file", err)
			}
			noTemporaries(t, data)
			noBlobs(t, data)
		})
	}
}

// TestCheckInfo: the qemu-img info answers of qemu 7 and 8 that name
// another file are refused.
func TestCheckInfo(t *testing.T) {
	const path = "/data/images/tmp/import-1"
	tests := []struct {
		name    string
		doc     string
		want    int64
		wantErr string
	}{
		{"qcow2", `{"virtual-size": 1073741824, "filename": "/data/images/tmp/import-1", "format": "qcow2"}`, 1 << 30, ""},
		{"qemu 8 children", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2",
			"children": [{"name": "file", "info": {"filename": "/data/images/tmp/import-1", "format": "file", "children": []}}]}`, 512, ""},
		{"vmdk one extent", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2",
			"format-specific": {"type": "vmdk", "data": {"extents": [{"filename": "/data/images/tmp/import-1"}]}}}`, 512, ""},
		{"backing file", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2", "backing-filename": "/etc/shadow"}`, 0,
			`qcow2 image has a backing file ("/etc/shadow"), which is not uploaded`},
		{"full backing file only", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2", "full-backing-filename": "nbd://x"}`, 0,
			`backing file ("nbd://x")`},
		{"data file", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2",
			"format-specific": {"type": "qcow2", "data": {"data-file": "/dev/sda"}}}`, 0, `external data file ("/dev/sda")`},
		{"other extent", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2",
			"format-specific": {"type": "vmdk", "data": {"extents": [{"filename": "/data/images/tmp/import-1"}, {"filename": "/root/x-s002.vmdk"}]}}}`, 0,
			`extent in another file ("/root/x-s002.vmdk")`},
		{"qemu 8 data-file child", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "qcow2",
			"children": [{"name": "file", "info": {"filename": "/data/images/tmp/import-1"}}, {"name": "data-file", "info": {"filename": "/srv/secret"}}]}`, 0,
			`its data in another file ("/srv/secret")`},
		{"json: file name", `{"virtual-size": 512, "filename": "json:{\"driver\":\"nbd\"}", "format": "qcow2"}`, 0, "its data in another file"},
		{"size 0", `{"virtual-size": 0, "filename": "/data/images/tmp/import-1", "format": "qcow2"}`, 0, "virtual size of 0 bytes"},
		{"other format", `{"virtual-size": 512, "filename": "/data/images/tmp/import-1", "format": "raw"}`, 0, `read the image as "raw", want "qcow2"`},
		{"not JSON", `image: x`, 0, "no JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkInfo([]byte(tt.doc), path, QCOW2)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("got %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}
