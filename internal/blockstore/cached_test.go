package blockstore

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fileImage writes b to a file in dir and opens it as a base image.
func fileImage(t *testing.T, dir string, b []byte) *Image {
	t.Helper()
	p := filepath.Join(dir, "base.img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := OpenImage(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

// Block states of the overlay staged by stagedOverlay, with 4 KiB blocks:
//
//	0-3   base            4-5  held (written)     6  trimmed (zero entry)
//	7     write-zeroed    8    held zeroes (noHole)
//	9     held, partly written over the base's bytes
//	10-19 base            20   the ragged last block (1000 bytes), held
const (
	sbs       = 4096
	stageSize = 20*sbs + 1000
)

// stagedOverlay opens an overlay of base in dir and brings its blocks to
// the states above; it returns the overlay, which the caller closes, and
// what the disk must read.
func stagedOverlay(t *testing.T, base Base, model []byte, dir string) (*Overlay, []byte) {
	t.Helper()
	o := mustOpen(t, base, dir, Persistent, Options{BlockSize: sbs})
	model = bytes.Clone(model)
	write := func(off int, p []byte) {
		if _, err := o.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(model[off:], p)
	}
	write(4*sbs, randomBase(2*sbs, 21).b)
	if err := o.Trim(6*sbs, sbs); err != nil {
		t.Fatal(err)
	}
	clear(model[6*sbs : 7*sbs])
	if err := o.WriteZeroes(7*sbs, sbs, false); err != nil {
		t.Fatal(err)
	}
	if err := o.WriteZeroes(8*sbs, sbs, true); err != nil {
		t.Fatal(err)
	}
	clear(model[7*sbs : 9*sbs])
	write(9*sbs+100, randomBase(200, 22).b)
	write(20*sbs+10, randomBase(500, 23).b)
	want := []uint32{entryBase, entryBase, entryBase, entryBase, 1, 2, entryZero, entryZero, 3, 4}
	if !slices.Equal(o.entries[:10], want) || o.entries[10] != entryBase || o.entries[20] != 5 {
		t.Fatalf("staged map: got %v, want %v, base..., slot 5 for block 20", o.entries, want)
	}
	if !bytes.Equal(readAll(t, o, o.Size()), model) {
		t.Fatal("staged overlay does not read as its model")
	}
	return o, model
}

// rangeCase is a read range and the storage it touches.
type rangeCase struct {
	name       string
	off, n     int64
	base, data bool // touches base blocks, overlay-held blocks
	bad        bool // out of range
}

var rangeCases = []rangeCase{
	{name: "base block", off: 100, n: 300, base: true},
	{name: "held block", off: 4*sbs + 10, n: sbs, data: true},
	{name: "trimmed block", off: 6 * sbs, n: sbs},
	{name: "write-zeroed block, inside", off: 7*sbs + 1, n: sbs - 2},
	{name: "trimmed and write-zeroed blocks", off: 6*sbs + 5, n: sbs},
	{name: "held zeroes", off: 8 * sbs, n: sbs, data: true},
	{name: "held block partly written", off: 9 * sbs, n: sbs, data: true},
	{name: "base, held and zero blocks", off: 3*sbs + 5, n: 7 * sbs, base: true, data: true},
	{name: "ragged last block", off: 20 * sbs, n: 1000, data: true},
	{name: "base then held last block", off: 19*sbs + 7, n: sbs + 993, base: true, data: true},
	{name: "whole disk", off: 0, n: stageSize, base: true, data: true},
	{name: "empty at the end", off: stageSize, n: 0},
	{name: "past the end", off: stageSize - 10, n: 20, bad: true},
	{name: "starts past the end", off: stageSize + 1, n: 0, bad: true},
	{name: "negative offset", off: -1, n: 10, bad: true},
}

func TestOverlayReadCached(t *testing.T) {
	mem := randomBase(stageSize, 20)
	for _, bc := range []struct {
		name string
		base Base
	}{
		{"file base", fileImage(t, t.TempDir(), mem.b)},
		{"base without readCached", mem},
	} {
		o, model := stagedOverlay(t, bc.base, mem.b, t.TempDir())
		t.Cleanup(func() { o.Close() })
		baseOK := false
		if f, ok := bc.base.(*Image); ok {
			baseOK = f.res != mayWait
		}
		for _, tc := range rangeCases {
			t.Run(bc.name+"/"+tc.name, func(t *testing.T) {
				p := bytes.Repeat([]byte{0xee}, int(max(tc.n, 0)))
				want := !tc.bad && (!tc.base || baseOK) && (!tc.data || o.dataRes != mayWait)
				got := o.readCached(p, tc.off)
				if got != want {
					t.Fatalf("readCached(%d bytes at %d) = %v, want %v (base residency %v, data %v)", tc.n, tc.off, got, want, baseOK, o.dataRes)
				}
				if got && !bytes.Equal(p, model[tc.off:tc.off+tc.n]) {
					t.Fatal("readCached said yes but filled p with the wrong bytes")
				}
			})
		}
	}
}

func TestOverlayFileSpan(t *testing.T) {
	mem := randomBase(stageSize, 30)
	img := fileImage(t, t.TempDir(), mem.b)
	// Spans come only from files in memory, wherever this test's temp dir
	// is; TestProbeResidency checks that rule on real file systems.
	img.res = inMemory
	o, model := stagedOverlay(t, img, mem.b, t.TempDir())
	defer o.Close()
	memO, _ := stagedOverlay(t, mem, mem.b, t.TempDir())
	defer memO.Close()
	for _, tc := range []struct {
		name   string
		off, n int64
		want   bool
	}{
		{"base blocks", 0, 4 * sbs, true},
		{"inside a base block", 100, 50, true},
		{"run of base blocks", 10 * sbs, 10 * sbs, true},
		{"base block then a held one", 3 * sbs, 2 * sbs, false},
		{"last byte of base before a held block", 4*sbs - 1, 2, false},
		{"trimmed block", 6 * sbs, 1, false},
		{"write-zeroed block", 7 * sbs, sbs, false},
		{"held last block", 20 * sbs, 1000, false},
		{"whole disk", 0, stageSize, false},
		{"zero length", 0, 0, false},
		{"negative length", 0, -1, false},
		{"past the end", stageSize - 10, 20, false},
		{"negative offset", -1, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, foff, ok := o.fileSpan(tc.off, tc.n)
			if ok != tc.want {
				t.Fatalf("fileSpan(%d, %d) ok = %v, want %v", tc.off, tc.n, ok, tc.want)
			}
			if ok {
				if f != img.f || foff != tc.off {
					t.Fatalf("fileSpan(%d, %d) = %s at %d, want the base file at %d", tc.off, tc.n, f.Name(), foff, tc.off)
				}
				got := make([]byte, tc.n)
				if _, err := f.ReadAt(got, foff); err != nil || !bytes.Equal(got, model[tc.off:tc.off+tc.n]) {
					t.Fatalf("the span's bytes differ from what the disk reads (err %v)", err)
				}
			}
			if _, _, ok := memO.fileSpan(tc.off, tc.n); ok {
				t.Fatal("fileSpan ok over a base that is not a file")
			}
		})
	}
	// On a disk, spans are not for the request loop (fileSpan), through
	// the overlay or the read-only disk.
	img.res = noWait
	ro, err := Open(img, "", None, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]sources{"overlay": o, "read-only": ro.(sources)} {
		if _, _, ok := d.fileSpan(0, sbs); ok {
			t.Fatalf("%s on a disk image: fileSpan ok", name)
		}
	}
	img.res = inMemory
	// A write takes a block out of the span range at once.
	if _, _, ok := o.fileSpan(12*sbs, sbs); !ok {
		t.Fatal("base block 12: fileSpan not ok before the write")
	}
	if _, err := o.WriteAt([]byte{1}, 12*sbs+5); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := o.fileSpan(11*sbs, 3*sbs); ok {
		t.Fatal("fileSpan ok over block 12 after a write to it")
	}
}

// overlayDirs are where the overlay's data file can live: the test's
// temp dir (a disk file system, usually) and /dev/shm (tmpfs), so both
// residency paths run.
func overlayDirs(t *testing.T) map[string]string {
	t.Helper()
	dirs := map[string]string{"tempdir": t.TempDir()}
	shm, err := os.MkdirTemp("/dev/shm", "bf-cached-test-")
	if err != nil {
		t.Logf("no tmpfs overlay case: %v", err)
		return dirs
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	dirs["tmpfs"] = shm
	return dirs
}

func TestOverlayWriteCached(t *testing.T) {
	mem := randomBase(stageSize, 40)
	img := fileImage(t, t.TempDir(), mem.b)
	for where, dir := range overlayDirs(t) {
		for i, tc := range []struct {
			name   string
			off, n int64
			held   bool // every block touched is held: may be taken
		}{
			{"inside a held block", 4*sbs + 7, 100, true},
			{"across two held blocks", 5*sbs - 50, 100, true},
			{"held zeroes", 8 * sbs, sbs, true},
			{"ragged last block to the end", 20*sbs + 900, 100, true},
			{"base block", 0, 100, false},
			{"trimmed block", 6 * sbs, 10, false},
			{"held block then a base one", 9 * sbs, sbs + 1, false},
			{"write-zeroed block then a held one", 8*sbs - 1, 2, false},
			{"past the end", stageSize - 10, 20, false},
			{"negative offset", -1, 10, false},
		} {
			t.Run(where+"/"+tc.name, func(t *testing.T) {
				o, model := stagedOverlay(t, img, mem.b, filepath.Join(dir, "case"+string(rune('a'+i))))
				entries, dirty := slices.Clone(o.entries), len(o.dirty)
				p := randomBase(int(tc.n), uint64(50+i)).b
				ok := o.WriteNow(p, tc.off)
				switch {
				case ok && !tc.held:
					t.Fatal("WriteNow took a write that needs a block allocated")
				case !ok && tc.held && o.dataRes == inMemory:
					t.Fatal("WriteNow refused a write to held blocks on tmpfs")
				case !ok && tc.held:
					// Allowed where the file system refuses RWF_NOWAIT
					// writes; the server then completes it with WriteAt.
					t.Logf("WriteNow said no on residency %v (RWF_NOWAIT writes supported: %v)", o.dataRes, o.nowaitWrites.Load())
					if _, err := o.WriteAt(p, tc.off); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(o.entries, entries) || len(o.dirty) != dirty {
					t.Fatal("a write to held blocks changed the map")
				}
				if tc.held {
					copy(model[tc.off:], p)
				}
				if !bytes.Equal(readAll(t, o, o.Size()), model) {
					t.Fatal("after WriteNow the disk does not read as expected")
				}
				// Cached writes go to the same data file: Flush makes
				// them durable like any other.
				closeReopenEquals(t, o, img, model)
			})
		}
	}
}

func TestFileCachedAndSpan(t *testing.T) {
	const size = 10000
	mem := randomBase(size, 60)
	img := fileImage(t, t.TempDir(), mem.b)
	ro, err := Open(img, "", None, Options{})
	if err != nil {
		t.Fatal(err)
	}
	roMem, err := Open(mem, "", None, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		off, n int64
		span   bool // fileSpan ok
		read   bool // readCached ok, if the file's residency allows
	}{
		{"whole file", 0, size, true, true},
		{"middle", 5000, 123, true, true},
		{"to the end", 9900, 100, true, true},
		{"empty at the end", size, 0, true, true},
		{"past the end", 9950, 100, false, false},
		{"starts past the end", size + 1, 0, false, false},
		{"negative offset", -1, 10, false, false},
		{"negative length", 0, -1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRead := tc.read && img.res != mayWait
			wantSpan := tc.span && img.res == inMemory
			// Mode none forwards both upgrades to the image unchanged.
			for _, d := range []struct {
				name string
				d    sources
			}{{"Image", img}, {"mode none", ro.(readOnly)}} {
				f, foff, ok := d.d.fileSpan(tc.off, tc.n)
				if ok != wantSpan || (ok && (f != img.f || foff != tc.off)) {
					t.Errorf("%s: fileSpan(%d, %d) = %v, %d, %v; want the image file at %d, %v", d.name, tc.off, tc.n, f, foff, ok, tc.off, wantSpan)
				}
				if tc.n < 0 {
					continue
				}
				p := make([]byte, tc.n)
				if ok := d.d.readCached(p, tc.off); ok != wantRead || (ok && !bytes.Equal(p, mem.b[tc.off:tc.off+tc.n])) {
					t.Errorf("%s: readCached(%d bytes at %d) = %v, want %v with the image's bytes", d.name, tc.n, tc.off, ok, wantRead)
				}
			}
			// Over an image that is not a file there is nothing to forward.
			if _, _, ok := roMem.(sources).fileSpan(tc.off, tc.n); ok {
				t.Error("mode none over a memory image: fileSpan ok")
			}
			if tc.n >= 0 && roMem.(sources).readCached(make([]byte, tc.n), tc.off) {
				t.Error("mode none over a memory image: readCached ok")
			}
		})
	}
	t.Run("mode none refuses cached writes", func(t *testing.T) {
		if ro.WriteNow([]byte{1, 2, 3}, 0) {
			t.Fatal("WriteNow ok on a read-only disk")
		}
		if !bytes.Equal(readAll(t, img, size), mem.b) {
			t.Fatal("the image changed")
		}
	})
}

// TestOverlayEachRun checks that reads are split where the source
// changes and nowhere else: one pread per run of base blocks, one per run
// of overlay blocks in consecutive slots.
func TestOverlayEachRun(t *testing.T) {
	mem := randomBase(stageSize, 31)
	o, _ := stagedOverlay(t, mem, mem.b, t.TempDir())
	defer o.Close()
	type run struct {
		e            uint32
		in, pos, len int64
	}
	for _, tc := range []struct {
		name   string
		off, n int64
		want   []run
	}{
		{"whole disk", 0, stageSize, []run{
			{entryBase, 0, 0, 4 * sbs},
			{1, 0, 4 * sbs, 2 * sbs}, // slots 1 and 2
			{entryZero, 0, 6 * sbs, 2 * sbs},
			{3, 0, 8 * sbs, 2 * sbs}, // slots 3 and 4
			{entryBase, 0, 10 * sbs, 10 * sbs},
			{5, 0, 20 * sbs, 1000},
		}},
		{"unaligned inside base blocks", 100, 3 * sbs, []run{{entryBase, 100, 100, 3 * sbs}}},
		{"held, zero, held", 5*sbs + 10, 3 * sbs, []run{
			{2, 10, 5*sbs + 10, sbs - 10},
			{entryZero, 0, 6 * sbs, 2 * sbs},
			{3, 0, 8 * sbs, 10},
		}},
		{"held then base", 9 * sbs, 2 * sbs, []run{{4, 0, 9 * sbs, sbs}, {entryBase, 0, 10 * sbs, sbs}}},
		{"one byte", 12*sbs + 7, 1, []run{{entryBase, 7, 12*sbs + 7, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []run
			done, err := o.eachRun(make([]byte, tc.n), tc.off, func(q []byte, e uint32, in, pos int64) error {
				got = append(got, run{e, in, pos, int64(len(q))})
				return nil
			})
			if err != nil || int64(done) != tc.n {
				t.Fatalf("eachRun did %d of %d bytes, err %v", done, tc.n, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("runs %+v, want %+v", got, tc.want)
			}
		})
	}
}
