package nbd

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// diskDir is a directory on a file system whose page cache can be dropped
// for one file: tmpfs pages cannot be, so a tmpfs TMPDIR falls back to
// /var/tmp.
func diskDir(t *testing.T) string {
	t.Helper()
	var st unix.Statfs_t
	dir := t.TempDir()
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp("/var/tmp", "nbd-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// dropCache writes f back and drops its pages from the page cache.
func dropCache(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// A READ of a span that is not in the page cache is read by a worker (the
// reads of several overlap, and the reply leaves in one piece) instead of
// being sent with sendfile, whose disk reads would run one after another
// in the writer. Once the data is cached, sendfile serves it again.
func TestColdSpanReadByWorker(t *testing.T) {
	const size = 2 << 20
	base := pattern(size)
	x := newFileExportIn(t, diskDir(t), base, size)
	dropCache(t, x.f)
	if inPageCache(x.f, 0, size) {
		if !noCachestat.Load() {
			t.Fatal("inPageCache says a file whose cache was just dropped is cached")
		}
		t.Log("this kernel has no cachestat(2): cold spans go by sendfile, as before")
	}
	c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
	c.open("disk", true)
	// ReadAts after each READ; the export counts every span it is asked
	// for, sent or not.
	for i, readAts := range []int64{1, 1} {
		if noCachestat.Load() {
			readAts = 0
		}
		want := [2]int64{int64(i + 1), readAts}
		c.send(Request{Type: CmdRead, Handle: uint64(i), Offset: 4096, Length: 256 << 10}, nil)
		h, e, data := c.reply(256 << 10)
		if h != uint64(i) || e != 0 || !bytes.Equal(data, base[4096:4096+256<<10]) {
			t.Fatalf("READ %d: handle %d errno %v, data equal %v", i, h, e, bytes.Equal(data, base[4096:4096+256<<10]))
		}
		if got := [2]int64{x.spans.Load(), x.readAts.Load()}; got != want {
			t.Fatalf("after READ %d: %d spans asked for and %d ReadAts, want %v", i, got[0], got[1], want)
		}
	}
}

func TestInPageCache(t *testing.T) {
	if noCachestat.Load() {
		t.Skip("no cachestat(2) on this kernel")
	}
	f, err := os.CreateTemp(diskDir(t), "cache")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(pattern(1 << 20)); err != nil {
		t.Fatal(err)
	}
	dropCache(t, f)
	buf := make([]byte, 8192)
	if _, err := f.ReadAt(buf, 64<<10); err != nil { // pulls in at least these two pages
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		off, n int64
		want   bool
	}{
		{"the pages just read", 64 << 10, 8192, true},
		{"unaligned inside them", 64<<10 + 100, 4000, true},
		{"past the end of the file", 2 << 20, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inPageCache(f, tc.off, tc.n); got != tc.want {
				t.Fatalf("inPageCache(%d, %d) = %v, want %v", tc.off, tc.n, got, tc.want)
			}
		})
	}
}
