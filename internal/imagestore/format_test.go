package imagestore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// header builds a 512-byte header: magic at 0, then each put at its offset.
func header(magic string, puts ...func([]byte)) []byte {
	h := make([]byte, HeaderSize)
	copy(h, magic)
	for _, p := range puts {
		p(h)
	}
	return h
}

func be32(off int, v uint32) func([]byte) {
	return func(h []byte) { binary.BigEndian.PutUint32(h[off:], v) }
}
func be64(off int, v uint64) func([]byte) {
	return func(h []byte) { binary.BigEndian.PutUint64(h[off:], v) }
}
func le32(off int, v uint32) func([]byte) {
	return func(h []byte) { binary.LittleEndian.PutUint32(h[off:], v) }
}
func le64(off int, v uint64) func([]byte) {
	return func(h []byte) { binary.LittleEndian.PutUint64(h[off:], v) }
}
func text(off int, s string) func([]byte) { return func(h []byte) { copy(h[off:], s) } }

func TestDetectFormat(t *testing.T) {
	const qfi = "QFI\xfb"
	tests := []struct {
		name    string
		h       []byte
		want    Format
		wantErr error  // the kind, nil for none
		msg     string // a substring of the error
	}{
		{"zeros", make([]byte, HeaderSize), Raw, nil, ""},
		{"nothing", nil, Raw, nil, ""},
		{"MBR", header("\xeb\x63\x90", text(510, "\x55\xaa")), Raw, nil, ""},
		{"shorter than a magic", []byte("QF"), Raw, nil, ""},
		{"qcow2 v3", header(qfi, be32(4, 3)), QCOW2, nil, ""},
		{"qcow2 v2", header(qfi, be32(4, 2))[:72], QCOW2, nil, ""},
		{"qcow v1", header(qfi, be32(4, 1))[:48], QCOW, nil, ""},
		{"qcow2 v4", header(qfi, be32(4, 4)), Raw, ErrUnsupported, "version 4"},
		{"qcow2 v0", header(qfi), Raw, ErrUnsupported, "want version 1, 2 or 3"},
		{"qcow2 backing file named in the header", header(qfi, be32(4, 3), be64(8, 200), be32(16, 8), text(200, "base.raw")),
			Raw, ErrExternalFile, `backing file ("base.raw"), which is not uploaded; merge it into one image first: qemu-img convert`},
		{"qcow2 backing file past the header", header(qfi, be32(4, 3), be64(8, 0x210), be32(16, 8)), Raw, ErrExternalFile, "qcow2 image has a backing file, which"},
		{"qcow2 backing name length past the end", header(qfi, be32(4, 2), be64(8, 500), be32(16, 0xffffffff)), Raw, ErrExternalFile, "backing file, which"},
		{"qcow backing file", header(qfi, be32(4, 1), be64(8, 48), be32(16, 4), text(48, "base")), Raw, ErrExternalFile, `qcow image has a backing file ("base")`},
		{"qcow2 encrypted", header(qfi, be32(4, 3), be32(32, 2)), Raw, ErrUnsupported, "encrypted (method 2)"},
		{"qcow encrypted", header(qfi, be32(4, 1), be32(36, 1)), Raw, ErrUnsupported, "qcow image is encrypted"},
		{"qcow2 external data file", header(qfi, be32(4, 3), be64(72, 1<<2)), Raw, ErrExternalFile, "external data file"},
		{"qcow2 v2 ignores bits past its header", header(qfi, be32(4, 2), be64(72, 1<<2)), QCOW2, nil, ""},
		{"qcow2 other incompatible bits", header(qfi, be32(4, 3), be64(72, 1|1<<3)), QCOW2, nil, ""},
		{"qcow2 magic only", []byte(qfi), Raw, ErrBadImage, "got 4 bytes of its header, want 8"},
		{"qcow2 v3 cut short", header(qfi, be32(4, 3))[:80], Raw, ErrBadImage, "qcow2 image cut short: got 80 bytes of its header, want 104"},
		{"vmdk", header("KDMV", le32(4, 1), le64(12, 2048)), VMDK, nil, ""},
		{"vmdk capacity 0", header("KDMV", le32(4, 1), le64(28, 1)), Raw, ErrExternalFile, "subformat=monolithicSparse"},
		{"vmdk cut short", []byte("KDMV\x01\x00\x00\x00"), Raw, ErrBadImage, "vmdk image cut short"},
		{"vmdk3", header("COWD"), VMDK, nil, ""},
		{"vmdk descriptor", []byte("# Disk DescriptorFile\nversion=1\nRW 16384 FLAT \"/etc/shadow\" 0\n"), Raw, ErrExternalFile,
			"VMDK descriptor file: its data is in the extent files it names, which are not uploaded; convert it to a single file first: qemu-img convert -O vmdk -o subformat=monolithicSparse"},
		{"vmdk descriptor without the title", []byte("\n  # made by hand\r\n\r\n  version=3\r\nRW 1 FLAT \"x\" 0\n"), Raw, ErrExternalFile, "VMDK descriptor"},
		{"text that is no descriptor", []byte("# notes\nhello\nversion=1\n"), Raw, nil, ""},
		{"vhdx", header("vhdxfile"), VHDX, nil, ""},
		{"vhd dynamic", header("conectix", be32(60, 3)), VPC, nil, ""},
		{"vhd differencing", header("conectix", be32(60, 4)), Raw, ErrExternalFile, "differencing VHD"},
		{"vhd bad type", header("conectix", be32(60, 7)), Raw, ErrBadImage, "disk type 7"},
		{"vhd cut short", []byte("conectix\x00\x00"), Raw, ErrBadImage, "vpc image cut short"},
		{"vdi", header("<<< Oracle VM VirtualBox Disk Image >>>\n", le32(64, 0xbeda107f)), VDI, nil, ""},
		{"qed", header("QED\x00"), Raw, ErrUnsupported, "QED image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectFormat(tt.h)
			if got != tt.want {
				t.Errorf("format %v, want %v", got, tt.want)
			}
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err %v, want none", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err %v, want one wrapping %q", err, tt.wantErr)
			case tt.wantErr != nil && !errors.Is(err, ErrRefused):
				t.Fatalf("err %v does not wrap ErrRefused", err)
			case tt.wantErr != nil && !strings.Contains(err.Error(), tt.msg):
				t.Fatalf("err %q, want one saying %q", err, tt.msg)
			}
		})
	}
}

// TestDetectFormatRealHeaders reads the headers qemu-img 7.2 wrote (the
// fuzz seeds; each file is named after what it holds).
func TestDetectFormatRealHeaders(t *testing.T) {
	tests := []struct {
		file    string
		want    Format
		wantErr error
	}{
		{"qcow2-v3", QCOW2, nil},
		{"qcow2-v2", QCOW2, nil},
		{"qcow-v1", QCOW, nil},
		{"qcow2-backing", Raw, ErrExternalFile},
		{"qcow2-data-file", Raw, ErrExternalFile},
		{"vmdk-monolithic-sparse", VMDK, nil},
		{"vmdk-stream-optimized", VMDK, nil},
		{"vmdk-parent", VMDK, nil}, // its parentFileNameHint is past the header: Import's qemu-img info check refuses it
		{"vmdk-descriptor", Raw, ErrExternalFile},
		{"vhdx", VHDX, nil},
		{"vpc-dynamic", VPC, nil},
		{"vpc-fixed", Raw, nil},
		{"vdi", VDI, nil},
		{"qed", Raw, ErrUnsupported},
		{"raw-mbr", Raw, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzDetectFormat", tt.file))
			got, err := DetectFormat(h)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// readSeed decodes a one-value fuzz corpus file: go test fuzz v1, []byte("...").
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("%s: want a go test fuzz v1 file of one []byte", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

func TestFormatString(t *testing.T) {
	for f, want := range map[Format]string{Raw: "raw", QCOW: "qcow", QCOW2: "qcow2", VMDK: "vmdk", VHDX: "vhdx", VPC: "vpc", VDI: "vdi", 42: "Format(42)", -1: "Format(-1)"} {
		if got := f.String(); got != want {
			t.Errorf("Format(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}

// FuzzDetectFormat: any header gives a format or an error wrapping
// ErrRefused, never a panic, and the same answer for the same bytes.
func FuzzDetectFormat(f *testing.F) {
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03"))
	f.Add([]byte("# Disk DescriptorFile\nversion=1\n"))
	f.Fuzz(func(t *testing.T, h []byte) {
		got, err := DetectFormat(h)
		if err != nil {
			if got != Raw || !errors.Is(err, ErrRefused) || err.Error() == "" {
				t.Fatalf("got %v, %v; want Raw and an error wrapping ErrRefused", got, err)
			}
		} else if got.String() == "" || strings.HasPrefix(got.String(), "Format(") {
			t.Fatalf("got format %d, which has no qemu-img name", int(got))
		}
		again, err2 := DetectFormat(h)
		if again != got || (err == nil) != (err2 == nil) {
			t.Fatalf("second call: %v, %v; first: %v, %v", again, err2, got, err)
		}
	})
}
