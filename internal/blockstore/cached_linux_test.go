package blockstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// fsResidency is what probeResidency must say for a file in dir, from the
// file system's type; ok is false for a type this test does not know.
func fsResidency(t *testing.T, dir string) (res residency, fsType int64, ok bool) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	switch st.Type {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return inMemory, st.Type, true
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
		return noWait, st.Type, true // buffered reads take RWF_NOWAIT
	}
	return mayWait, st.Type, false
}

// diskDir is a temp dir on a disk file system (one whose reads take
// RWF_NOWAIT), for a test that needs a page cache in front of a disk;
// why says what the test needs it for.
func diskDir(t *testing.T, why string) string {
	t.Helper()
	dir := t.TempDir()
	if res, fsType, _ := fsResidency(t, dir); res != noWait {
		testutil.SkipUnlessCI(t, fmt.Sprintf("%s is on file system %#x, not a disk file system: %s", dir, fsType, why))
	}
	return dir
}

func TestProbeResidency(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(*testing.T) string
	}{
		{"/dev/shm", testutil.ShmDir},
		{"test temp dir", (*testing.T).TempDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			want, fsType, known := fsResidency(t, dir)
			if tc.name == "/dev/shm" && want != inMemory {
				t.Fatalf("/dev/shm is file system %#x, not tmpfs", fsType)
			}
			mem := randomBase(64<<10, 70)
			img := fileImage(t, dir, mem.b)
			if !known {
				// Whatever the probe says, image and overlay data in the
				// same file system must agree.
				t.Logf("%s is on file system %#x, which this test has no expectation for; probe says %v", dir, fsType, img.res)
				want = img.res
			}
			if img.res != want {
				t.Fatalf("image on file system %#x: residency %v, want %v", fsType, img.res, want)
			}
			if _, _, ok := img.fileSpan(0, 4096); ok != (want == inMemory) {
				t.Fatalf("image on file system %#x: fileSpan ok = %v, want it only for files in memory", fsType, ok)
			}
			o := mustOpen(t, img, filepath.Join(dir, "overlay"), Ephemeral, Options{BlockSize: 4096})
			defer o.Close()
			if o.dataRes != want {
				t.Fatalf("overlay data on file system %#x: residency %v, want %v", fsType, o.dataRes, want)
			}
			// Data just written is in memory either way.
			p := make([]byte, 8192)
			if ok := img.readCached(p, 4096); ok != (want != mayWait) || (ok && !bytes.Equal(p, mem.b[4096:4096+8192])) {
				t.Fatalf("readCached of a freshly written image = %v, want %v with its bytes", ok, want != mayWait)
			}
		})
	}
}

// TestReadCachedNotResident drops an image's pages from the page cache.
// readCached then says no, or yes with the right bytes: RWF_NOWAIT is
// best effort, and on Linux 6.18/ext4/virtio a preadv2 of dropped pages
// was seen to succeed in anywhere from 0 to 10 of 10 rounds, after
// doing the I/O itself (~0.5 ms). So only correctness is asserted, and
// that data a ReadAt brought back is always served.
func TestReadCachedNotResident(t *testing.T) {
	dir := diskDir(t, "it drops pages from the page cache")
	mem := randomBase(1<<20, 80)
	img := fileImage(t, dir, mem.b)
	if err := img.f.Sync(); err != nil { // only clean pages can be dropped
		t.Fatal(err)
	}
	const rounds, n = 10, 64 << 10
	p := make([]byte, n)
	refused := 0
	for i := range int64(rounds) {
		off := i * n
		dropPages(t, img.f, off, n)
		clear(p)
		if !img.readCached(p, off) {
			refused++
		} else if !bytes.Equal(p, mem.b[off:off+n]) {
			t.Fatalf("round %d: readCached of dropped pages said yes with the wrong bytes", i)
		}
		if _, err := img.ReadAt(p, off); err != nil {
			t.Fatal(err)
		}
		clear(p)
		if !img.readCached(p, off) || !bytes.Equal(p, mem.b[off:off+n]) {
			t.Fatalf("round %d: readCached after ReadAt brought the data back: not ok, or wrong bytes", i)
		}
	}
	t.Logf("readCached refused dropped pages in %d of %d rounds", refused, rounds)
}

// dropPages drops f's clean pages from the page cache until none of
// [off, off+n) is resident. DONTNEED skips pages the kernel holds a moment
// longer (per-CPU LRU batches), so it drops until mincore agrees.
func dropPages(t *testing.T, f *os.File, off, n int64) {
	t.Helper()
	for try := 0; resident(t, f, off, n); try++ {
		if try == 50 {
			t.Fatalf("pages still in the page cache after %d FADV_DONTNEED", try)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
}

// resident says whether any page of [off, off+n) of f is in the page cache.
func resident(t *testing.T, f *os.File, off, n int64) bool {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		if v&1 != 0 {
			return true
		}
	}
	return false
}

func TestMappedSpan(t *testing.T) {
	dir := diskDir(t, "it maps an image on a disk")
	mem := randomBase(stageSize, 90)
	img := fileImage(t, dir, mem.b)
	o, model := stagedOverlay(t, img, mem.b, filepath.Join(dir, "overlay"))
	defer o.Close()
	// A lone machine's reads are not sent from the mapping.
	for _, n := range []int{0, 1} {
		img.SetSharers(n)
		if _, ok := img.mappedSpan(0, sbs); ok {
			t.Fatalf("mappedSpan ok with %d machines reading the image, want it only for two or more", n)
		}
	}
	img.SetSharers(2)
	for _, tc := range []struct {
		name   string
		off, n int64
		want   bool // from the overlay; the image itself maps any range inside it
	}{
		{"base blocks", 0, 4 * sbs, true},
		{"unaligned inside base blocks", 100, 2*sbs + 5, true},
		{"base then held block", 3 * sbs, 2 * sbs, false},
		{"run of base blocks to the last", 10 * sbs, 10 * sbs, true},
		{"zero length", 0, 0, false},
		{"past the end", stageSize - 10, 20, false},
		{"negative offset", -1, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := o.mappedSpan(tc.off, tc.n)
			if ok != tc.want || (ok && !bytes.Equal(b, model[tc.off:tc.off+tc.n])) {
				t.Fatalf("overlay mappedSpan(%d, %d) = %v (bytes right: %v), want %v", tc.off, tc.n, ok, ok && bytes.Equal(b, model[tc.off:tc.off+tc.n]), tc.want)
			}
			inImage := tc.off >= 0 && tc.n > 0 && tc.off+tc.n <= stageSize
			if b, ok := img.mappedSpan(tc.off, tc.n); ok != inImage || (ok && !bytes.Equal(b, mem.b[tc.off:tc.off+tc.n])) {
				t.Fatalf("image mappedSpan(%d, %d) = %v, want %v with the image's bytes", tc.off, tc.n, ok, inImage)
			}
		})
	}
	// Pages that are not in the page cache are not offered: reading them
	// would wait for the disk. (Pages mapped into this process cannot be
	// dropped, so this image's are never read through the mapping.)
	big := randomBase(4<<20, 91)
	cold := fileImage(t, t.TempDir(), big.b)
	cold.SetSharers(2)
	if err := cold.f.Sync(); err != nil {
		t.Fatal(err)
	}
	dropPages(t, cold.f, 0, 4<<20)
	if _, ok := cold.mappedSpan(1<<20, 256<<10); ok {
		t.Fatal("mappedSpan offered pages the page cache had just dropped")
	}
	if _, err := cold.ReadAt(make([]byte, 256<<10), 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, ok := cold.mappedSpan(1<<20, 256<<10); !ok || !bytes.Equal(b, big.b[1<<20:1<<20+256<<10]) {
		t.Fatal("mappedSpan refused, or gave other bytes, after a ReadAt brought the pages back")
	}
	// An image in memory is mapped for any number of machines: it has no
	// readahead for the mapping to disturb.
	shm := fileImage(t, testutil.ShmDir(t), mem.b)
	for _, n := range []int{0, 1, 2} {
		shm.SetSharers(n)
		if b, ok := shm.mappedSpan(sbs, 2*sbs); !ok || !bytes.Equal(b, mem.b[sbs:3*sbs]) {
			t.Fatalf("mappedSpan of an image on tmpfs with %d machines reading it: ok %v (bytes right: %v), want the image's bytes", n, ok, ok && bytes.Equal(b, mem.b[sbs:3*sbs]))
		}
	}
}

// TestWriteCachedWholePages is the state of ext4 once it has refused an
// RWF_NOWAIT write: WriteNow then takes writes of whole pages into
// held blocks with a plain pwrite (they need nothing from the disk) and
// leaves writes of part of a page to WriteAt.
func TestWriteCachedWholePages(t *testing.T) {
	dir := diskDir(t, "it writes to an overlay on ext4 or the like")
	mem := randomBase(stageSize, 90)
	img := fileImage(t, dir, mem.b)
	for i, tc := range []struct {
		name   string
		off, n int64
		taken  bool
	}{
		{"one whole page", 4 * sbs, sbs, true},
		{"two whole pages in two blocks", 4 * sbs, 2 * sbs, true},
		{"held zeroes, whole", 8 * sbs, sbs, true},
		{"part of a page", 4*sbs + 7, 100, false},
		{"a page's length, unaligned", 4*sbs + 512, sbs, false},
		{"whole pages then part of one", 4 * sbs, sbs + 512, false},
		{"whole page of a base block", 0, sbs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, model := stagedOverlay(t, img, mem.b, filepath.Join(dir, fmt.Sprint("case", i)))
			o.nowaitWrites.Store(false)
			p := randomBase(int(tc.n), uint64(91+i)).b
			if got := o.WriteNow(p, tc.off); got != tc.taken {
				t.Fatalf("WriteNow(%d bytes at %d) = %v, want %v", tc.n, tc.off, got, tc.taken)
			}
			// As the server does: a refused write, perhaps half done, is
			// completed by WriteAt.
			if !tc.taken {
				if _, err := o.WriteAt(p, tc.off); err != nil {
					t.Fatal(err)
				}
			}
			copy(model[tc.off:], p)
			if !bytes.Equal(readAll(t, o, o.Size()), model) {
				t.Fatal("the disk does not read as written")
			}
			closeReopenEquals(t, o, img, model)
		})
	}
}
