package blockstore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// memImage is an in-memory base image.
type memImage struct{ b []byte }

func (m memImage) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}
func (m memImage) Size() int64 { return int64(len(m.b)) }

func randomBase(size int, seed uint64) memImage {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return memImage{b}
}

func mustOpen(t *testing.T, base Base, dir string, mode Mode, opts Options) *Overlay {
	t.Helper()
	o, err := OpenOverlay(base, dir, mode, opts)
	if err != nil {
		t.Fatalf("OpenOverlay: %v", err)
	}
	return o
}

// closeReopenEquals closes o, opens its persistent overlay again on base
// and checks that the disk reads as model.
func closeReopenEquals(t *testing.T, o *Overlay, base Base, model []byte) {
	t.Helper()
	dir := o.dir
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o2 := mustOpen(t, base, dir, Persistent, Options{})
	defer o2.Close()
	if !bytes.Equal(readAll(t, o2, o2.Size()), model) {
		t.Fatal("after Close and reopen the disk differs from the model")
	}
}

func readAll(t *testing.T, d io.ReaderAt, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	if n, err := d.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt whole disk: n=%d err=%v", n, err)
	}
	return b
}

// crash closes an overlay's files without flushing, like kill -9: what was
// written with pwrite stays in the page cache, the in-memory map is lost.
func crash(o *Overlay) { o.closeFiles() }

// TestOverlayModel runs random operations against an Overlay and a plain
// byte slice that models it, comparing every read.
func TestOverlayModel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blockSize int
		size      int
	}{
		{"4k-aligned", 4 << 10, 256 << 10},
		{"4k-ragged-end", 4 << 10, 256<<10 + 1234},
		{"64k-ragged-end", 64 << 10, 1<<20 + 777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := randomBase(tc.size, 7)
			o := mustOpen(t, base, t.TempDir(), Persistent, Options{BlockSize: tc.blockSize})
			defer o.Close()
			model := bytes.Clone(base.b)
			r := rand.New(rand.NewPCG(42, uint64(tc.blockSize)))
			bs := int64(tc.blockSize)
			for i := range 600 {
				off := r.Int64N(int64(tc.size))
				n := r.Int64N(min(int64(tc.size)-off, 3*bs) + 1)
				switch op := r.IntN(10); {
				case op < 4:
					p := make([]byte, n)
					for j := range p {
						p[j] = byte(r.Uint32())
					}
					if _, err := o.WriteAt(p, off); err != nil {
						t.Fatalf("op %d WriteAt(%d, %d): %v", i, off, n, err)
					}
					copy(model[off:], p)
				case op < 5:
					if err := o.Trim(off, n); err != nil {
						t.Fatalf("op %d Trim: %v", i, err)
					}
					// Overlay semantics (stricter than NBD's "unspecified"):
					// wholly covered blocks read as zeroes, the rest is kept.
					first, last := o.wholeBlocks(off, n)
					clear(model[first*bs : min(last*bs, int64(tc.size))])
				case op < 6:
					if err := o.WriteZeroes(off, n, r.IntN(2) == 0); err != nil {
						t.Fatalf("op %d WriteZeroes: %v", i, err)
					}
					clear(model[off : off+n])
				case op < 7:
					if err := o.Flush(); err != nil {
						t.Fatalf("op %d Flush: %v", i, err)
					}
				default:
					got := make([]byte, n)
					if _, err := o.ReadAt(got, off); err != nil {
						t.Fatalf("op %d ReadAt(%d, %d): %v", i, off, n, err)
					}
					if !bytes.Equal(got, model[off:off+n]) {
						t.Fatalf("op %d ReadAt(%d, %d) differs from the model", i, off, n)
					}
				}
			}
			if !bytes.Equal(readAll(t, o, o.Size()), model) {
				t.Fatal("final disk differs from the model")
			}
			// What was flushed on Close comes back on reopen.
			closeReopenEquals(t, o, base, model)
		})
	}
}

func TestReadPastEnd(t *testing.T) {
	base := randomBase(10000, 1)
	o := mustOpen(t, base, t.TempDir(), Ephemeral, Options{BlockSize: 4096})
	defer o.Close()
	p := make([]byte, 100)
	n, err := o.ReadAt(p, 9950)
	if n != 50 || err != io.EOF || !bytes.Equal(p[:50], base.b[9950:]) {
		t.Fatalf("ReadAt across the end: got n=%d err=%v, want n=50 err=EOF", n, err)
	}
	if _, err := o.WriteAt(p, 9950); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("WriteAt across the end: got %v, want EINVAL", err)
	}
	if err := o.Trim(-1, 1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Trim(-1): got %v, want EINVAL", err)
	}
}

func TestModes(t *testing.T) {
	base := randomBase(64<<10, 2)
	pattern := bytes.Repeat([]byte{0xab}, 4096)
	for _, tc := range []struct {
		mode     Mode
		survives bool
	}{
		{Ephemeral, false},
		{Persistent, true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(base, dir, tc.mode, Options{BlockSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.WriteAt(pattern, 8192); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d, err = Open(base, dir, tc.mode, Options{BlockSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			got := readAll(t, d, d.Size())
			want := base.b
			if tc.survives {
				want = bytes.Clone(base.b)
				copy(want[8192:], pattern)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("after reopen in mode %v: writes survived=%v, want %v", tc.mode, !bytes.Equal(got, base.b), tc.survives)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		d, err := Open(base, "", None, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !d.ReadOnly() {
			t.Fatal("mode none: ReadOnly() = false")
		}
		for name, err := range map[string]error{
			"write":  func() error { _, err := d.WriteAt(pattern, 0); return err }(),
			"trim":   d.Trim(0, 4096),
			"zeroes": d.WriteZeroes(0, 4096, false),
		} {
			if !errors.Is(err, syscall.EPERM) {
				t.Errorf("%s on mode none: got %v, want EPERM", name, err)
			}
		}
		if !bytes.Equal(readAll(t, d, d.Size()), base.b) {
			t.Fatal("mode none does not read the base")
		}
	})
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"ephemeral", "persistent", "none"} {
		m, err := ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Error("ParseMode(sometimes): got nil error")
	}
}

func TestReset(t *testing.T) {
	base := randomBase(1<<20, 3)
	o := mustOpen(t, base, t.TempDir(), Persistent, Options{BlockSize: 4096, BaseID: "sha256:abc"})
	defer o.Close()
	if _, err := o.WriteAt(bytes.Repeat([]byte{1}, 512<<10), 4096); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := o.Reset(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, o, o.Size()), base.b) {
		t.Fatal("after Reset the disk does not read as the base")
	}
	if st, _ := os.Stat(filepath.Join(o.dir, dataFileName)); st.Size() != 0 {
		t.Fatalf("after Reset the data file has %d bytes, want 0", st.Size())
	}
	// Reset keeps the base id: a reopen with the same id works.
	dir := o.dir
	o.Close()
	o2 := mustOpen(t, base, dir, Persistent, Options{BaseID: "sha256:abc"})
	o2.Close()
	if err := RemoveOverlay(dir); err != nil {
		t.Fatal(err)
	}
}

// TestDurabilityOrdering simulates kill -9 at several points and checks
// that flushed data survives and the map never points at foreign data.
func TestDurabilityOrdering(t *testing.T) {
	const bs = 4096
	base := randomBase(16*bs, 4)
	a := bytes.Repeat([]byte{0xaa}, bs)
	b := bytes.Repeat([]byte{0xbb}, bs)
	dir := t.TempDir()

	o := mustOpen(t, base, dir, Persistent, Options{BlockSize: bs})
	o.WriteAt(a, 0) // block 0 -> slot 0
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	// Not flushed: trimming block 0 releases slot 0, but it must not be
	// reused before a Flush records the release, or the on-disk map's
	// entry for block 0 would point at block 5's data after a crash.
	o.Trim(0, bs)
	o.WriteAt(b, 5*bs)
	crash(o)

	o = mustOpen(t, base, dir, Persistent, Options{})
	got := readAll(t, o, o.Size())
	if !bytes.Equal(got[:bs], a) {
		t.Fatal("block 0: flushed data lost, or replaced by a later unflushed write")
	}
	if !bytes.Equal(got[5*bs:6*bs], base.b[5*bs:6*bs]) {
		t.Fatal("block 5: unflushed allocation visible after crash; want the base")
	}
	// Flushed this time: the write survives the crash.
	o.WriteAt(b, 5*bs)
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	crash(o)
	o = mustOpen(t, base, dir, Persistent, Options{})
	defer o.Close()
	if got := readAll(t, o, o.Size()); !bytes.Equal(got[5*bs:6*bs], b) {
		t.Fatal("block 5: flushed write lost across crash")
	}
}

// enospcFile fails writes that would grow the data file past limit.
type enospcFile struct {
	file
	limit int64
}

func (f *enospcFile) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.limit {
		return 0, &os.PathError{Op: "write", Path: "overlay.data", Err: syscall.ENOSPC}
	}
	return f.file.WriteAt(p, off)
}

func TestENOSPC(t *testing.T) {
	const bs = 4096
	base := randomBase(64*bs, 5)
	dir := t.TempDir()
	o := mustOpen(t, base, dir, Persistent, Options{BlockSize: bs})
	full := &enospcFile{file: o.data, limit: 2 * bs}
	o.data = full
	p := bytes.Repeat([]byte{0xcc}, 3*bs)
	n, err := o.WriteAt(p, 10*bs)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: got %v, want an error wrapping ENOSPC", err)
	}
	if n != 2*bs {
		t.Fatalf("write on a full disk: got n=%d, want %d (two blocks fit)", n, 2*bs)
	}
	want := bytes.Clone(base.b)
	copy(want[10*bs:], p[:2*bs])
	if !bytes.Equal(readAll(t, o, o.Size()), want) {
		t.Fatal("after ENOSPC the disk is not the base plus the blocks that fit")
	}
	// Space comes back: the failed slot is reused and everything is sane.
	full.limit = 1 << 40
	if _, err := o.WriteAt(p, 10*bs); err != nil {
		t.Fatal(err)
	}
	copy(want[10*bs:], p)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = mustOpen(t, base, dir, Persistent, Options{})
	defer o.Close()
	if !bytes.Equal(readAll(t, o, o.Size()), want) {
		t.Fatal("after ENOSPC, recovery and reopen the disk differs")
	}
	if o.nextSlot != 3 {
		t.Fatalf("slots used: %d, want 3 (the failed slot must be reused)", o.nextSlot)
	}
}

func TestOpenRefusals(t *testing.T) {
	base := randomBase(64<<10, 6)
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		o := mustOpen(t, base, dir, Persistent, Options{})
		defer o.Close()
		if o2, err := OpenOverlay(base, dir, Persistent, Options{}); err == nil {
			o2.Close()
			t.Fatal("second open of an overlay in use: got nil error")
		}
	})
	for _, tc := range []struct {
		name    string
		damage  func(dir string)
		base    Base
		opts    Options
		wantErr error
	}{
		{"bad magic", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, mapFileName), os.O_WRONLY, 0)
			f.WriteAt([]byte("NOTAMAP!"), 0)
			f.Close()
		}, base, Options{}, ErrDamaged},
		{"truncated", func(dir string) { os.Truncate(filepath.Join(dir, mapFileName), mapHeaderLen+10) }, base, Options{}, ErrDamaged},
		{"other base size", func(string) {}, randomBase(128<<10, 6), Options{}, nil},
		{"other base id", func(string) {}, base, Options{BaseID: "other"}, nil},
		{"bad block size", func(string) {}, base, Options{BlockSize: 1000}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := mustOpen(t, base, dir, Persistent, Options{BaseID: "mine"})
			o.Close()
			tc.damage(dir)
			o2, err := OpenOverlay(tc.base, dir, Persistent, tc.opts)
			if err == nil {
				o2.Close()
				t.Fatal("got nil error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			t.Log(err)
		})
	}
}

func BenchmarkOverlayRead(b *testing.B) {
	base := randomBase(8<<20, 8)
	o, err := OpenOverlay(base, b.TempDir(), Ephemeral, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	o.WriteAt(make([]byte, 4<<20), 0)
	p := make([]byte, 128<<10)
	b.SetBytes(int64(len(p)))
	for i := 0; b.Loop(); i++ {
		o.ReadAt(p, int64(i%64)*int64(len(p)))
	}
}
