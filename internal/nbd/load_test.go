package nbd

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
)

// loadingExport is fileExport with [from, to) offered to the workers as
// spans to load (Store.ReadSpan), as an image's mapping is. claim, when
// set, is the size it says it has, past the end of its file.
type loadingExport struct {
	*fileExport
	from, to int64
	claim    int64
	refuse   atomic.Bool  // LoadSpan says no, as after a read error
	loads    atomic.Int64 // LoadSpan calls that served the READ
}

func newLoadingExport(t *testing.T, content []byte, from, to int64) *loadingExport {
	return &loadingExport{fileExport: newFileExport(t, content, 0), from: from, to: to}
}

func (e *loadingExport) Size() int64 {
	if e.claim > 0 {
		return e.claim
	}
	return e.fileExport.Size()
}

func (e *loadingExport) Loadable(off, n int64) bool { return off >= e.from && off+n <= e.to }

func (e *loadingExport) LoadSpan(off, n int64) ([]byte, bool) {
	if e.refuse.Load() || !e.Loadable(off, n) {
		return nil, false
	}
	b, ok := e.copyOf(off, n)
	if ok {
		e.loads.Add(1)
	}
	return b, ok
}

func (e *loadingExport) ReadNow(p []byte, off int64, files bool) (Span, bool) {
	return readNow(e, p, off, files)
}
func (e *loadingExport) ReadSpan(p []byte, off int64) (Span, error) { return readSpan(e, p, off) }

func TestLoadedReads(t *testing.T) {
	const size = 8 << 20
	base := pattern(size)
	for _, tc := range []struct {
		name   string
		off, n int64
		refuse bool
		// Which path served the READ.
		loads, cached, readAts int64
	}{
		{name: "256 KiB, page aligned", off: 1 << 20, n: 256 << 10, loads: 1},
		{name: "64 KiB, unaligned", off: 12345, n: minSendfile, loads: 1},
		{name: "4 MiB and 3 bytes", off: 2 << 20, n: 4<<20 + 3, loads: 1},
		{name: "odd length", off: 3 << 20, n: 100001, loads: 1},
		{name: "small read stays on the loop", off: 4096, n: 4096, cached: 1},
		{name: "not loadable: from the cache on the loop", off: size - 128<<10, n: 128 << 10, cached: 1},
		{name: "LoadSpan says no: ReadAt", off: 1 << 20, n: 256 << 10, refuse: true, readAts: 1},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newLoadingExport(t, base, 0, size-256<<10)
				x.refuse.Store(tc.refuse)
				c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
				c.open("disk", structured)
				c.send(Request{Type: CmdRead, Handle: 7, Offset: uint64(tc.off), Length: uint32(tc.n)}, nil)
				if h, e, data := c.reply(int(tc.n)); h != 7 || e != 0 || !bytes.Equal(data, base[tc.off:tc.off+tc.n]) {
					t.Fatalf("READ %d at %d: handle %d errno %v, bytes equal %v", tc.n, tc.off, h, e, bytes.Equal(data, base[tc.off:tc.off+tc.n]))
				}
				got := [3]int64{x.loads.Load(), x.cachedReads.Load(), x.readAts.Load()}
				if want := [3]int64{tc.loads, tc.cached, tc.readAts}; got != want {
					t.Fatalf("paths taken (LoadSpan, ReadCached, ReadAt): got %v, want %v", got, want)
				}
				// The connection is still in step: a second READ works.
				c.send(Request{Type: CmdRead, Handle: 8, Offset: 0, Length: 16}, nil)
				if h, e, data := c.reply(16); h != 8 || e != 0 || !bytes.Equal(data, base[:16]) {
					t.Fatalf("READ after the first: handle %d errno %v data %x", h, e, data)
				}
			})
		}
	}
}

// A span that the file does not hold (it is shorter than the export says)
// fails to load; ReadAt then reports the error, and the session goes on.
func TestLoadedReadFallsBackOnError(t *testing.T) {
	base := pattern(1 << 20)
	x := newLoadingExport(t, base, 0, 2<<20)
	x.claim = 2 << 20
	c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
	c.open("disk", true)
	c.send(Request{Type: CmdRead, Handle: 1, Offset: 1<<20 - 64<<10, Length: 256 << 10}, nil)
	if h, e, _ := c.reply(256 << 10); h != 1 || e != EIO {
		t.Fatalf("READ past the file's end: handle %d errno %v, want EIO", h, e)
	}
	if x.readAts.Load() != 1 {
		t.Fatalf("ReadAt called %d times, want 1 (the fallback that reports the error)", x.readAts.Load())
	}
	c.send(Request{Type: CmdRead, Handle: 2, Offset: 0, Length: 256 << 10}, nil)
	if h, e, data := c.reply(256 << 10); h != 2 || e != 0 || !bytes.Equal(data, base[:256<<10]) {
		t.Fatalf("READ after the failed one: handle %d errno %v", h, e)
	}
}

// TestLoadedReadsPipelined sends many more READs at once than the session
// has workers, with small READs and WRITEs between them, and checks every
// reply and that every large READ was loaded, none read into a buffer.
func TestLoadedReadsPipelined(t *testing.T) {
	const size, loadEnd = 8 << 20, 6 << 20 // WRITEs above loadEnd
	base := pattern(size)
	sizes := []int{minSendfile, 256 << 10, 4096, 300000, 1 << 20, 512}
	for _, structured := range []bool{false, true} {
		t.Run("structured="+strconv.FormatBool(structured), func(t *testing.T) {
			x := newLoadingExport(t, base, 0, loadEnd)
			c := dial(t, serveExport(t, Config{MaxInFlight: 2}, x), ClientFixedNewstyle|ClientNoZeroes)
			c.open("disk", structured)
			r := rand.New(rand.NewPCG(3, 4))
			want := map[uint64][]byte{}
			lens, offs := map[uint64]int{}, map[uint64]uint64{}
			var batch []byte
			reads, small := 0, int64(0)
			for h := uint64(0); reads < 120; h++ {
				if h%10 == 9 {
					p := bytes.Repeat([]byte{byte(h)}, 4096)
					batch = append(AppendRequest(batch, Request{Type: CmdWrite, Handle: h, Offset: uint64(loadEnd + int(h)*4096), Length: 4096}), p...)
					want[h] = nil
					continue
				}
				n := sizes[reads%len(sizes)]
				off := r.IntN(loadEnd - n)
				batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: uint64(off), Length: uint32(n)})
				want[h], lens[h], offs[h] = base[off:off+n], n, uint64(off)
				reads++
				if n < minSendfile {
					small++
				}
			}
			c.exchange(batch, want, lens, offs)
			if buffered := x.cachedReads.Load() + x.readAts.Load(); buffered != small || x.loads.Load() != int64(reads)-small {
				t.Fatalf("%d of %d READs loaded and %d read into a buffer, want %d and only the %d small ones", x.loads.Load(), reads, buffered, int64(reads)-small, small)
			}
			c.send(Request{Type: CmdDisc}, nil)
			c.expectClosed()
		})
	}
}
