package diskprobe

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDetectFS(t *testing.T) {
	tests := []struct {
		name  string
		size  int64
		write func(t *testing.T, d *memDisk)
		want  FS
		err   error
	}{
		{name: "ext4", size: mib, write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "ext4", "root", uuid1) },
			want: FS{Type: "ext4", Label: "root", UUID: uuid1}},
		{name: "ext4 with a 16-byte label", size: mib, write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "ext4", "abcdefghijklmnop", uuid1) },
			want: FS{Type: "ext4", Label: "abcdefghijklmnop", UUID: uuid1}},
		{name: "xfs with a 12-byte label", size: mib, write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "xfs", "abcdefghijkl", uuid2) },
			want: FS{Type: "xfs", Label: "abcdefghijkl", UUID: uuid2}},
		{name: "btrfs without a label", size: mib, write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "btrfs", "", uuid3) },
			want: FS{Type: "btrfs", UUID: uuid3}},
		{name: "btrfs with a long label", size: mib, write: func(t *testing.T, d *memDisk) { putFS(t, d, 0, "btrfs", strings.Repeat("b", 255), uuid3) },
			want: FS{Type: "btrfs", Label: strings.Repeat("b", 255), UUID: uuid3}},
		{name: "nothing", size: mib, write: func(t *testing.T, d *memDisk) {}, err: ErrNoFS},
		{name: "device shorter than the ext superblock", size: 1100, write: func(t *testing.T, d *memDisk) {
			b := extSuperblock(t, "x", uuid1)
			d.write(t, 0, b[:1100])
		}, err: ErrNoFS},
		{name: "bare ext magic on random data", size: mib, write: func(t *testing.T, d *memDisk) {
			b := make([]byte, 2048)
			b[1024+56], b[1024+57] = 0x53, 0xef
			d.write(t, 0, b)
		}, err: ErrNoFS},
		{name: "ext external journal device", size: mib, write: func(t *testing.T, d *memDisk) {
			b := extSuperblock(t, "journal", uuid1)
			b[1024+96] = 0x08
			d.write(t, 0, b)
		}, err: ErrNoFS},
		{name: "ext with a 128 KiB block size", size: mib, write: func(t *testing.T, d *memDisk) {
			b := extSuperblock(t, "x", uuid1)
			b[1024+24] = 7
			d.write(t, 0, b)
		}, err: ErrNoFS},
		{name: "xfs with a bad block size", size: mib, write: func(t *testing.T, d *memDisk) {
			b := xfsSuperblock(t, "x", uuid1)
			b[6] = 0x11
			d.write(t, 0, b)
		}, err: ErrNoFS},
		{name: "btrfs cut short", size: 0x10100, write: func(t *testing.T, d *memDisk) {
			d.write(t, 0x10000, btrfsSuperblock(t, "x", uuid1)[:0x100])
		}, err: ErrNoFS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDisk(tc.size)
			tc.write(t, d)
			got, err := DetectFS(d)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("DetectFS = %+v, %v; want error %v", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("DetectFS = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// failingDisk fails every read, as an NBD device does when the server
// goes away.
type failingDisk struct{}

var errDisk = errors.New("nbd: connection reset")

func (failingDisk) ReadAt([]byte, int64) (int, error) { return 0, errDisk }

func TestIOErrorsPassThrough(t *testing.T) {
	if _, err := DetectFS(failingDisk{}); !errors.Is(err, errDisk) || errors.Is(err, ErrNoFS) {
		t.Errorf("DetectFS error = %v, want the read error and not ErrNoFS", err)
	}
	if _, err := ReadTable(failingDisk{}, mib); !errors.Is(err, errDisk) || errors.Is(err, ErrNoTable) {
		t.Errorf("ReadTable error = %v, want the read error and not ErrNoTable", err)
	}
	if _, err := FindRoot(failingDisk{}, mib, Choice{}); !errors.Is(err, errDisk) {
		t.Errorf("FindRoot error = %v, want the read error", err)
	}
	// A short read at the end of a device is not an error.
	if _, err := DetectFS(io.NewSectionReader(newDisk(mib), 0, 10)); !errors.Is(err, ErrNoFS) {
		t.Errorf("DetectFS on 10 bytes = %v, want ErrNoFS", err)
	}
}

func TestFSString(t *testing.T) {
	for _, tc := range []struct {
		fs   FS
		want string
	}{
		{FS{}, "no Linux file system"},
		{FS{Type: "xfs", UUID: uuid1}, "xfs UUID=" + uuid1},
		{FS{Type: "ext4", Label: "root", UUID: uuid1}, `ext4 LABEL="root"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.fs.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}
