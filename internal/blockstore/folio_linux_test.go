package blockstore

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// The overlay keeps the page cache of its data file in single pages on a
// disk's file system. On ext4 since Linux 6.16 a 4 KiB write into a large
// folio walks every buffer head of the folio: after one sequential read of
// a client's disk (readahead makes folios of up to 2 MiB), fio's 4 KiB
// random writes ran at a third of their speed, for every NBD server tried.

// TestOverlayReadsNoReadahead: a read of an overlay block brings in the
// pages asked for and no more, so no read leaves large folios behind.
func TestOverlayReadsNoReadahead(t *testing.T) {
	dir := diskDir(t, "it drops the overlay's pages and watches readahead")
	const bs, blocks = 64 << 10, 32
	base := randomBase(bs*blocks, 31)
	o := mustOpen(t, base, filepath.Join(dir, "ovl"), Persistent, Options{BlockSize: bs})
	defer o.Close()
	fill := randomBase(bs*blocks, 32).b
	if _, err := o.WriteAt(fill, 0); err != nil {
		t.Fatal(err)
	}
	if err := o.data.Sync(); err != nil { // only clean pages can be dropped
		t.Fatal(err)
	}
	size := int64(len(fill))
	data := o.data.(*os.File)
	dropPages(t, data, 0, size)
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"first page", 0, 4096},
		{"a block", 4 * bs, bs},
		{"sequential, the next block", 5 * bs, bs},
		{"sequential, the one after", 6 * bs, bs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.n)
			if _, err := o.ReadAt(p, tc.off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p, fill[tc.off:tc.off+tc.n]) {
				t.Fatal("read the wrong bytes")
			}
			if end := tc.off + tc.n; resident(t, data, end, size-end) {
				t.Fatalf("after reading [%d, %d) pages beyond it are in the page cache: readahead ran on the overlay", tc.off, end)
			}
		})
	}
}

// TestCopyUpInPages: a block copied into the overlay on its first write
// sits in the page cache in single pages, not in one folio of the block's
// size. A whole-block write to another file in the same directory shows
// whether this kernel makes large folios at all.
func TestCopyUpInPages(t *testing.T) {
	dir := diskDir(t, "it looks at the page cache of an overlay on a disk")
	const bs = 64 << 10
	base := randomBase(8*bs, 33)
	o := mustOpen(t, base, filepath.Join(dir, "ovl"), Persistent, Options{BlockSize: bs})
	defer o.Close()
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"4 KiB into a base block", 2*bs + 8192, 4096},
		{"a few bytes", 5*bs + 100, 10},
		{"a whole block", 6 * bs, bs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := o.WriteAt(randomBase(int(tc.n), 34).b, tc.off); err != nil {
				t.Fatal(err)
			}
			e := o.entries[tc.off/bs]
			if e == entryBase || e == entryZero {
				t.Fatalf("block %d was not copied into the overlay (entry %d)", tc.off/bs, e)
			}
			slot := int64(e-1) * bs
			if tc.n == bs {
				return // the client's own whole-block write stays one write
			}
			if k := largeFolioPages(t, o.data.(*os.File), slot, bs); k != 0 {
				t.Fatalf("%d of the %d pages of the copied block are in large folios", k, bs/4096)
			}
		})
	}
	control, err := os.Create(filepath.Join(dir, "control"))
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	if _, err := control.WriteAt(make([]byte, bs), 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("a %d KiB write to a file here puts %d of its pages in large folios (0: this kernel makes none here, and the test above could not tell)",
		bs>>10, largeFolioPages(t, control, 0, bs))
}

// largeFolioPages counts the pages of f's [off, off+n) the page cache
// holds in folios of more than one page, from /proc/kpageflags, which
// needs root (pagemap hides page frame numbers from others).
func largeFolioPages(t *testing.T, f *os.File, off, n int64) int {
	t.Helper()
	const (
		present      = 1 << 63
		pfnMask      = 1<<55 - 1
		compoundHead = 1 << 15
		compoundTail = 1 << 16
	)
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	flags, err := os.Open("/proc/kpageflags")
	if err != nil {
		testutil.SkipUnlessCI(t, "no /proc/kpageflags: "+err.Error())
	}
	defer flags.Close()
	page := os.Getpagesize()
	large := 0
	for i := 0; i < len(m); i += page {
		pageSink += m[i] // maps the page the cache holds
		var e [8]byte
		if _, err := pagemap.ReadAt(e[:], int64(uintptr(unsafe.Pointer(&m[i]))/uintptr(page))*8); err != nil {
			t.Fatal(err)
		}
		v := binary.LittleEndian.Uint64(e[:])
		if v&present == 0 {
			t.Fatalf("page %d of the range is not mapped after a read of it", i/page)
		}
		pfn := v & pfnMask
		if pfn == 0 {
			testutil.SkipUnlessCI(t, "/proc/self/pagemap hides page frame numbers: run as root")
		}
		if _, err := flags.ReadAt(e[:], int64(pfn)*8); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(e[:])&(compoundHead|compoundTail) != 0 {
			large++
		}
	}
	return large
}

// pageSink keeps the reads that map pages from being optimized away.
var pageSink byte
