package blockstore

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestLoadSpan checks the mapped bytes a worker sends for a READ: the ranges
// an overlay offers (base blocks only), the bytes, and that pages the page
// cache had dropped come back from the disk and stay mapped.
func TestLoadSpan(t *testing.T) {
	for _, where := range []struct {
		name string
		dir  func(t *testing.T) string
	}{{"temp dir", func(t *testing.T) string { return t.TempDir() }}, {"tmpfs", testutil.ShmDir}} {
		t.Run(where.name, func(t *testing.T) {
			mem := randomBase(stageSize, 40)
			img := fileImage(t, where.dir(t), mem.b)
			o, model := stagedOverlay(t, img, mem.b, t.TempDir())
			defer o.Close()
			memO, _ := stagedOverlay(t, mem, mem.b, t.TempDir())
			defer memO.Close()
			ro, err := Open(img, "", None, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name   string
				off, n int64
				want   bool // through the overlay; the image itself loads any range inside it
			}{
				{"base blocks", 0, 4 * sbs, true},
				{"inside a base block", 100, 50, true},
				{"base block then a held one", 3 * sbs, 2 * sbs, false},
				{"trimmed block", 6 * sbs, 1, false},
				{"held last block", 20 * sbs, 1000, false},
				{"zero length", 0, 0, false},
				{"past the end", stageSize - 10, 20, false},
				{"negative offset", -1, 10, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if got := o.loadable(tc.off, tc.n); got != tc.want {
						t.Fatalf("overlay loadable(%d, %d) = %v, want %v", tc.off, tc.n, got, tc.want)
					}
					b, ok := o.loadSpan(tc.off, tc.n)
					if ok != tc.want || (ok && !bytes.Equal(b, model[tc.off:tc.off+tc.n])) {
						t.Fatalf("overlay loadSpan(%d, %d) ok = %v (bytes right: %v), want %v", tc.off, tc.n, ok, ok && bytes.Equal(b, model[tc.off:tc.off+tc.n]), tc.want)
					}
					inImage := tc.off >= 0 && tc.n > 0 && tc.off+tc.n <= stageSize
					for name, d := range map[string]interface {
						loadable(off, n int64) bool
						loadSpan(off, n int64) ([]byte, bool)
					}{"image": img, "read-only disk": ro.(sources)} {
						b, ok := d.loadSpan(tc.off, tc.n)
						if ok != inImage || d.loadable(tc.off, tc.n) != inImage || (ok && !bytes.Equal(b, mem.b[tc.off:tc.off+tc.n])) {
							t.Fatalf("%s loadSpan(%d, %d) ok = %v, want %v with the image's bytes", name, tc.off, tc.n, ok, inImage)
						}
					}
					if memO.loadable(tc.off, tc.n) {
						t.Fatal("loadable over a base that is not a file")
					}
					if _, ok := memO.loadSpan(tc.off, tc.n); ok {
						t.Fatal("loadSpan ok over a base that is not a file")
					}
				})
			}
		})
	}
	// Pages the page cache dropped are read again, and the range is then
	// resident and mapped.
	big := randomBase(4<<20, 41)
	cold := fileImage(t, t.TempDir(), big.b)
	if err := cold.f.Sync(); err != nil {
		t.Fatal(err)
	}
	dropPages(t, cold.f, 0, 4<<20)
	const off, n = 1<<20 + 100, 256 << 10
	b, ok := cold.loadSpan(off, n)
	if !ok {
		t.Fatal("loadSpan of dropped pages said no")
	}
	// Mapped pages survive FADV_DONTNEED: loadSpan mapped them, so the
	// copy into the socket will not fault. (Before b is read: reading it
	// would map them.)
	if err := unix.Fadvise(int(cold.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	for pg := int64(off) &^ 4095; pg < off+n; pg += 4096 {
		if !resident(t, cold.f, pg, 4096) {
			t.Fatalf("page at %d of the loaded range left the page cache: it was not mapped", pg)
		}
	}
	if !bytes.Equal(b, big.b[off:off+n]) {
		t.Fatal("loadSpan of dropped pages gave other bytes")
	}
}
