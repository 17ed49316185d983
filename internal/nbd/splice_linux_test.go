package nbd

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// storedExport is fileExport with no sendfile spans and [from, to) offered
// to the workers as stored spans (StoredSpanner). claim, when set, is
// the size it says it has, past the end of its file.
type storedExport struct {
	*fileExport
	from, to int64
	claim    int64
	stored   atomic.Int64 // StoredSpan calls that said yes
}

func (e *storedExport) Size() int64 {
	if e.claim > 0 {
		return e.claim
	}
	return e.fileExport.Size()
}

func (e *storedExport) StoredSpan(off, n int64) (*os.File, int64, bool) {
	if off < e.from || off+n > e.to {
		return nil, 0, false
	}
	e.stored.Add(1)
	return e.f, off, true
}

func newStoredExport(t *testing.T, content []byte, from, to int64) *storedExport {
	return &storedExport{fileExport: newFileExport(t, content, 0), from: from, to: to}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}

// waitFDs waits up to 5 s for the open descriptors to come back to want:
// the server closes a session's pipes when the session ends, a moment
// after the client sees its connection close.
func waitFDs(t *testing.T, want int) {
	t.Helper()
	got := openFDs(t)
	for deadline := time.Now().Add(5 * time.Second); got > want && time.Now().Before(deadline); got = openFDs(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if got > want {
		t.Fatalf("%d file descriptors open after the session ended, want %d: pipes leaked", got, want)
	}
}

func TestSplicedReads(t *testing.T) {
	const size = 4 << 20
	base := pattern(size)
	for _, tc := range []struct {
		name    string
		off, n  int64
		spliced bool // else ReadCached answers it on the request loop
	}{
		{name: "256 KiB, page aligned", off: 1 << 20, n: 256 << 10, spliced: true},
		{name: "64 KiB, unaligned", off: 12345, n: minSendfile, spliced: true},
		{name: "1 MiB", off: 2 << 20, n: maxSplice, spliced: true},
		{name: "odd length", off: 3 << 20, n: 100001, spliced: true},
		{name: "small read stays on the loop", off: 4096, n: 4096},
		{name: "over the splice limit stays on the loop", off: 0, n: maxSplice + 4096},
		{name: "not a stored span", off: size - 128<<10, n: 128 << 10},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newStoredExport(t, base, 0, size-256<<10)
				c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
				c.open("disk", structured)
				c.send(Request{Type: CmdRead, Handle: 7, Offset: uint64(tc.off), Length: uint32(tc.n)}, nil)
				if h, e, data := c.reply(int(tc.n)); h != 7 || e != 0 || !bytes.Equal(data, base[tc.off:tc.off+tc.n]) {
					t.Fatalf("READ %d at %d: handle %d errno %v, bytes equal %v", tc.n, tc.off, h, e, bytes.Equal(data, base[tc.off:tc.off+tc.n]))
				}
				// Spliced means neither ReadCached nor ReadAt read it.
				cached, readAts := x.cachedReads.Load(), x.readAts.Load()
				if spliced := cached == 0 && readAts == 0 && x.stored.Load() > 0; spliced != tc.spliced {
					t.Fatalf("spliced = %v (ReadCached %d, ReadAt %d, stored spans %d), want %v", spliced, cached, readAts, x.stored.Load(), tc.spliced)
				}
				// A pipe is reused: the same READ again, in step.
				c.send(Request{Type: CmdRead, Handle: 8, Offset: uint64(tc.off), Length: uint32(tc.n)}, nil)
				if h, e, data := c.reply(int(tc.n)); h != 8 || e != 0 || !bytes.Equal(data, base[tc.off:tc.off+tc.n]) {
					t.Fatalf("second READ: handle %d errno %v", h, e)
				}
			})
		}
	}
}

// A span that the file does not hold (it is shorter than the export says)
// fails to splice; ReadAt then reports the error, and the session goes on.
func TestSplicedReadFallsBackOnError(t *testing.T) {
	base := pattern(1 << 20)
	x := newStoredExport(t, base, 0, 2<<20)
	x.claim = 2 << 20
	fds := openFDs(t)
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
	c.send(Request{Type: CmdDisc}, nil)
	c.expectClosed()
	c.c.Close()
	waitFDs(t, fds+1) // the server's listener is still open
}

// TestSplicedReadsPipelined sends more READs at once than the session has
// pipes, with small READs and WRITEs between them, and checks every reply,
// that large READs wait for a pipe instead of taking a buffer, and that no
// pipe outlives the session.
func TestSplicedReadsPipelined(t *testing.T) {
	const size, storedEnd = 8 << 20, 6 << 20 // WRITEs above storedEnd
	base := pattern(size)
	sizes := []int{minSendfile, 256 << 10, 4096, 300000, maxSplice, 512}
	for _, structured := range []bool{false, true} {
		t.Run("structured="+strconv.FormatBool(structured), func(t *testing.T) {
			x := newStoredExport(t, base, 0, storedEnd)
			fds := openFDs(t)
			c := dial(t, serveExport(t, Config{MaxInFlight: 2}, x), ClientFixedNewstyle|ClientNoZeroes)
			c.open("disk", structured)
			r := rand.New(rand.NewPCG(3, 4))
			want := map[uint64][]byte{}
			lens, offs := map[uint64]int{}, map[uint64]uint64{}
			var batch []byte
			reads := 0
			for h := uint64(0); reads < 120; h++ {
				if h%10 == 9 {
					p := bytes.Repeat([]byte{byte(h)}, 4096)
					batch = append(AppendRequest(batch, Request{Type: CmdWrite, Handle: h, Offset: uint64(storedEnd + int(h)*4096), Length: 4096}), p...)
					want[h] = nil
					continue
				}
				n := sizes[reads%len(sizes)]
				off := r.IntN(storedEnd - n)
				batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: uint64(off), Length: uint32(n)})
				want[h], lens[h], offs[h] = base[off:off+n], n, uint64(off)
				reads++
			}
			c.exchange(batch, want, lens, offs)
			// Every large READ was spliced, waiting for a pipe when all
			// were taken: only the small ones went through a buffer.
			// (A READ whose pages a pipe of pipe-max-size cannot hold
			// takes a buffer too.)
			unspliced := int64(0)
			for h, n := range lens {
				if n < minSendfile || pipeBytes(int64(offs[h]), n) > maxSplice {
					unspliced++
				}
			}
			if buffered := x.cachedReads.Load() + x.readAts.Load(); buffered != unspliced {
				t.Fatalf("%d of %d READs went through a buffer, want only the %d too small or too large for a pipe", buffered, reads, unspliced)
			}
			c.send(Request{Type: CmdDisc}, nil)
			c.expectClosed()
			c.c.Close()
			waitFDs(t, fds+1) // the server's listener is still open
		})
	}
}
