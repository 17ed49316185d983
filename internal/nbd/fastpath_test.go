package nbd

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// fileExport is an Export over a real file whose Store offers every kind
// of span, counting which path served each request. Only [0, spanEnd) is offered
// for sendfile: a span's bytes must not change before its reply leaves,
// so tests write only above it.
type fileExport struct {
	f         *os.File
	size      int64
	spanEnd   int64
	noCache   atomic.Bool // ReadCached and WriteCached say no
	maps      atomic.Bool // MappedSpan offers [spanEnd, size), copied from the file
	mapsAll   atomic.Bool // MappedSpan offers [0, size)
	halfWrite atomic.Bool // WriteCached writes half of p, then says no

	spans, cachedReads, readAts  atomic.Int64
	mapped                       atomic.Int64
	cachedWrites, writeAts       atomic.Int64
	flushes, writeAtsBeforeFlush atomic.Int64
}

func newFileExport(t *testing.T, content []byte, spanEnd int64) *fileExport {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "export")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	return &fileExport{f: f, size: int64(len(content)), spanEnd: spanEnd}
}

func (e *fileExport) ReadAt(p []byte, off int64) (int, error) {
	e.readAts.Add(1)
	return e.f.ReadAt(p, off)
}

func (e *fileExport) WriteAt(p []byte, off int64) (int, error) {
	e.writeAts.Add(1)
	return e.f.WriteAt(p, off)
}

func (e *fileExport) Size() int64             { return e.size }
func (e *fileExport) ReadOnly() bool          { return false }
func (e *fileExport) Trim(int64, int64) error { return nil }

func (e *fileExport) Flush() error {
	e.writeAtsBeforeFlush.Store(e.writeAts.Load())
	e.flushes.Add(1)
	return nil
}

func (e *fileExport) MappedSpan(off, n int64) ([]byte, bool) {
	from := e.spanEnd
	if e.mapsAll.Load() {
		from = 0
	}
	if !e.maps.Load() || off < from || off+n > e.size {
		return nil, false
	}
	b, ok := e.copyOf(off, n)
	if ok {
		e.mapped.Add(1)
	}
	return b, ok
}

// copyOf is the file's n bytes at off, in memory as a mapping's are.
func (e *fileExport) copyOf(off, n int64) ([]byte, bool) {
	b := make([]byte, n)
	if _, err := e.f.ReadAt(b, off); err != nil {
		return nil, false
	}
	return b, true
}

func (e *fileExport) FileSpan(off, n int64) (*os.File, int64, bool) {
	if off+n > e.spanEnd {
		return nil, 0, false
	}
	e.spans.Add(1)
	return e.f, off, true
}

func (e *fileExport) ReadCached(p []byte, off int64) bool {
	if e.noCache.Load() {
		return false
	}
	if n, _ := e.f.ReadAt(p, off); n != len(p) {
		return false
	}
	e.cachedReads.Add(1)
	return true
}

func (e *fileExport) WriteCached(p []byte, off int64) bool {
	if e.halfWrite.Load() {
		e.f.WriteAt(p[:len(p)/2], off)
		return false
	}
	if e.noCache.Load() {
		return false
	}
	if n, _ := e.f.WriteAt(p, off); n != len(p) {
		return false
	}
	e.cachedWrites.Add(1)
	return true
}

func (e *fileExport) Loadable(int64, int64) bool           { return false }
func (e *fileExport) LoadSpan(int64, int64) ([]byte, bool) { return nil, false }

func (e *fileExport) ReadNow(p []byte, off int64, files bool) (Span, bool) {
	return readNow(e, p, off, files)
}
func (e *fileExport) ReadSpan(p []byte, off int64) (Span, error) { return readSpan(e, p, off) }
func (e *fileExport) WriteNow(p []byte, off int64) bool          { return e.WriteCached(p, off) }

// minSendfile is the smallest READ the test exports answer with a span
// (mapped, file or loaded), as blockstore's images do.
const minSendfile = 64 << 10

// sources are the ways a test export can answer a READ.
type sources interface {
	ReadAt(p []byte, off int64) (int, error)
	MappedSpan(off, n int64) ([]byte, bool)
	FileSpan(off, n int64) (*os.File, int64, bool)
	Loadable(off, n int64) bool
	LoadSpan(off, n int64) ([]byte, bool)
	ReadCached(p []byte, off int64) bool
}

// readNow is a test export's Store.ReadNow: for a large READ its mapping,
// then its file, then a worker if it can load the range; else its cache.
func readNow(x sources, p []byte, off int64, files bool) (Span, bool) {
	if n := int64(len(p)); n >= minSendfile {
		if b, ok := x.MappedSpan(off, n); ok {
			return Span{Bytes: b}, true
		}
		if files {
			if f, foff, ok := x.FileSpan(off, n); ok {
				return Span{File: f, FileOff: foff}, true
			}
		}
		if x.Loadable(off, n) {
			return Span{}, false
		}
	}
	if x.ReadCached(p, off) {
		return Span{Bytes: p}, true
	}
	return Span{}, false
}

// readSpan is a test export's Store.ReadSpan: loaded if it can, else ReadAt.
func readSpan(x sources, p []byte, off int64) (Span, error) {
	if n := int64(len(p)); n >= minSendfile && x.Loadable(off, n) {
		if b, ok := x.LoadSpan(off, n); ok {
			return Span{Bytes: b}, nil
		}
	}
	if err := ReadFull(x, p, off); err != nil {
		return Span{}, err
	}
	return Span{Bytes: p}, nil
}

// content reads the file behind the server's back.
func (e *fileExport) content(t *testing.T, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := e.f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

type oneExport struct{ e Export }

func (o oneExport) Lookup(string, net.Addr) (Export, error) { return o.e, nil }

// serveExport serves e under any name on a loopback port until the test
// ends, and prints the server's log if the test failed.
func serveExport(t *testing.T, cfg Config, e Export) string {
	t.Helper()
	return serve(t, cfg, oneExport{e}, &testutil.SyncBuffer{})
}

// anyReply reads the next reply, whatever request it answers. Simple
// replies do not say how much data follows, so lens gives each READ
// handle's length; a data chunk must carry its READ's offset, from offs.
func (c *client) anyReply(lens map[uint64]int, offs map[uint64]uint64) (uint64, Errno, []byte) {
	c.t.Helper()
	magic, err := c.r.Peek(4)
	if err != nil {
		c.t.Fatal(err)
	}
	if binary.BigEndian.Uint32(magic) == magicSimpleReply {
		h, e, err := ParseSimpleReply(c.read(SimpleReplyLen))
		if err != nil {
			c.t.Fatal(err)
		}
		if e != 0 {
			return h, e, nil
		}
		return h, 0, c.read(lens[h])
	}
	ch, err := ParseChunkHeader(c.read(ChunkHeaderLen))
	if err != nil {
		c.t.Fatal(err)
	}
	if ch.Flags&ReplyFlagDone == 0 {
		c.t.Fatalf("handle %d: chunk %v without the DONE flag; this server sends one chunk per reply", ch.Handle, ch.Type)
	}
	payload := c.read(int(ch.Length))
	switch ch.Type {
	case ChunkOffsetData:
		if off := binary.BigEndian.Uint64(payload); off != offs[ch.Handle] {
			c.t.Fatalf("handle %d: data chunk for offset %d, want %d", ch.Handle, off, offs[ch.Handle])
		}
		return ch.Handle, 0, payload[offsetDataExtra:]
	case ChunkError:
		e, _, err := ParseErrorChunk(payload)
		if err != nil {
			c.t.Fatal(err)
		}
		return ch.Handle, e, nil
	case ChunkNone:
		return ch.Handle, 0, nil
	}
	c.t.Fatalf("handle %d: unexpected chunk type %v", ch.Handle, ch.Type)
	return 0, 0, nil
}

func TestFastPathReads(t *testing.T) {
	const size, spanEnd = 8 << 20, 6 << 20
	base := pattern(size) // the race detector makes pattern slow: once per test
	for _, tc := range []struct {
		name    string
		off, n  int64
		noCache bool
		maps    bool
		mapsAll bool
		mapped  int64
		// Which path served the READ; anyPath: no opinion.
		spans, cached, readAts int64
		anyPath                bool
	}{
		{name: "64 KiB by sendfile", off: 12345, n: minSendfile, spans: 1},
		{name: "4 MiB by sendfile", off: 1000, n: 4<<20 + 3, spans: 1},
		{name: "sendfile to the end of the span range", off: spanEnd - 100<<10, n: 100 << 10, spans: 1},
		{name: "small read from cache", off: 777, n: 4096, cached: 1},
		{name: "just under 64 KiB from cache", off: 1, n: minSendfile - 1, cached: 1},
		{name: "small read falls back to ReadAt", off: 4096, n: 4096, noCache: true, readAts: 1},
		{name: "large read outside the span range from cache", off: spanEnd, n: 128 << 10, cached: 1},
		{name: "large read across the span range end from cache", off: spanEnd - 4096, n: 128 << 10, cached: 1},
		{name: "large read neither spanned nor cached: ReadAt", off: spanEnd, n: 128 << 10, noCache: true, readAts: 1},
		{name: "large read from the mapping", off: spanEnd + 4096, n: 128 << 10, maps: true, mapped: 1},
		{name: "mapping before the file span", off: 0, n: 128 << 10, maps: true, mapsAll: true, mapped: 1},
		{name: "file span where the mapping says no", off: 0, n: 128 << 10, maps: true, spans: 1},
		{name: "small read from cache, not the mapping", off: spanEnd, n: 4096, maps: true, cached: 1},
		{name: "zero-length read", off: 4096, n: 0, anyPath: true},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newFileExport(t, base, spanEnd)
				x.noCache.Store(tc.noCache)
				x.maps.Store(tc.maps)
				x.mapsAll.Store(tc.mapsAll)
				c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
				c.open("disk", structured)
				c.send(Request{Type: CmdRead, Handle: 42, Offset: uint64(tc.off), Length: uint32(tc.n)}, nil)
				h, e, data := c.reply(int(tc.n))
				if h != 42 || e != 0 {
					t.Fatalf("reply: handle %d errno %v, want 42 and no error", h, e)
				}
				if want := base[tc.off : tc.off+tc.n]; !bytes.Equal(data, want) {
					t.Fatalf("READ %d bytes at %d: got %d bytes that differ from the export", tc.n, tc.off, len(data))
				}
				got := [3]int64{x.spans.Load(), x.cachedReads.Load(), x.readAts.Load()}
				if want := [3]int64{tc.spans, tc.cached, tc.readAts}; (got != want || x.mapped.Load() != tc.mapped) && !tc.anyPath {
					t.Fatalf("paths taken (sendfile, ReadCached, ReadAt): got %v and %d mapped, want %v and %d", got, x.mapped.Load(), want, tc.mapped)
				}
				// The connection is still in step: a second READ works.
				c.send(Request{Type: CmdRead, Handle: 43, Offset: 0, Length: 16}, nil)
				if h, e, data := c.reply(16); h != 43 || e != 0 || !bytes.Equal(data, base[:16]) {
					t.Fatalf("READ after the first: handle %d errno %v data %x", h, e, data)
				}
			})
		}
	}
}

// Without a socket to sendfile to (net.Pipe), the server must not ask for
// file spans, and large READs come from ReadCached.
func TestFastPathWithoutSendfile(t *testing.T) {
	for _, structured := range []bool{false, true} {
		t.Run("structured="+strconv.FormatBool(structured), func(t *testing.T) {
			base := pattern(1 << 20)
			x := newFileExport(t, base, 1<<20)
			a, b := net.Pipe()
			t.Cleanup(func() { b.Close() })
			done := make(chan struct{})
			go func() { NewServer(oneExport{x}, Config{}).serveConn(t.Context(), a, func() {}); close(done) }()
			c := &client{t: t, c: b, r: newReader(b)}
			c.read(GreetingLen)
			c.write([]byte{0, 0, 0, byte(ClientFixedNewstyle | ClientNoZeroes)})
			c.open("disk", structured)
			c.send(Request{Type: CmdRead, Handle: 1, Offset: 100, Length: 256 << 10}, nil)
			if h, e, data := c.reply(256 << 10); h != 1 || e != 0 || !bytes.Equal(data, base[100:100+256<<10]) {
				t.Fatalf("READ over a pipe: handle %d errno %v, data equal %v", h, e, bytes.Equal(data, base[100:100+256<<10]))
			}
			if s, cr := x.spans.Load(), x.cachedReads.Load(); s != 0 || cr != 1 {
				t.Fatalf("over a pipe: %d sendfile spans and %d cached reads, want 0 and 1", s, cr)
			}
			c.send(Request{Type: CmdDisc}, nil)
			<-done
		})
	}
}

func TestFastPathWrites(t *testing.T) {
	const size, spanEnd = 1 << 20, 512 << 10
	base := pattern(size)
	for _, tc := range []struct {
		name                 string
		flags                CmdFlags
		noCache, halfWrite   bool
		cached, writeAts, fl int64
	}{
		{name: "no FUA: taken in memory", cached: 1},
		{name: "FUA: WriteAt then Flush", flags: CmdFlagFUA, writeAts: 1, fl: 1},
		{name: "WriteCached says no: WriteAt", noCache: true, writeAts: 1},
		{name: "WriteCached half done: WriteAt completes it", halfWrite: true, writeAts: 1},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newFileExport(t, base, spanEnd)
				x.noCache.Store(tc.noCache)
				x.halfWrite.Store(tc.halfWrite)
				c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
				c.open("disk", structured)
				data := bytes.Repeat([]byte("fast path "), 3000)
				off := int64(spanEnd + 4321)
				c.send(Request{Type: CmdWrite, Flags: tc.flags, Handle: 7, Offset: uint64(off), Length: uint32(len(data))}, data)
				if h, e := c.replyAny(); h != 7 || e != 0 {
					t.Fatalf("WRITE reply: handle %d errno %v", h, e)
				}
				got := [3]int64{x.cachedWrites.Load(), x.writeAts.Load(), x.flushes.Load()}
				if want := [3]int64{tc.cached, tc.writeAts, tc.fl}; got != want {
					t.Fatalf("paths taken (WriteCached, WriteAt, Flush): got %v, want %v", got, want)
				}
				if tc.fl > 0 && x.writeAtsBeforeFlush.Load() != tc.writeAts {
					t.Fatal("FUA: Flush ran before the WriteAt it must make durable")
				}
				if !bytes.Equal(x.content(t, off, int64(len(data))), data) {
					t.Fatal("the export does not hold the written bytes")
				}
				c.send(Request{Type: CmdRead, Handle: 8, Offset: uint64(off), Length: uint32(len(data))}, nil)
				if h, e, back := c.reply(len(data)); h != 8 || e != 0 || !bytes.Equal(back, data) {
					t.Fatalf("READ back: handle %d errno %v, data equal %v", h, e, bytes.Equal(back, data))
				}
			})
		}
	}
}

// TestFastPathPipelined sends a burst of mixed READs and WRITEs without
// waiting, so the request loop answers some from cache while workers
// answer others, and checks that every request gets exactly one reply
// with the right data.
func TestFastPathPipelined(t *testing.T) {
	const size, spanEnd = 8 << 20, 4 << 20 // READs below spanEnd, WRITEs above
	sizes := []int{512, 4096, minSendfile, 100000, 300000, 8191, minSendfile - 1}
	base := pattern(size)
	for _, tc := range []struct {
		name       string
		structured bool
		noCache    bool
	}{
		{"simple", false, false},
		{"structured", true, false},
		{"structured, cache says no", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newFileExport(t, base, spanEnd)
			x.noCache.Store(tc.noCache)
			c := dial(t, serveExport(t, Config{MaxInFlight: 4}, x), ClientFixedNewstyle|ClientNoZeroes)
			c.open("disk", tc.structured)
			r := rand.New(rand.NewPCG(1, 2))
			model := bytes.Clone(base)
			want := map[uint64][]byte{}
			lens, offs := map[uint64]int{}, map[uint64]uint64{}
			var batch []byte
			reads, writes, fuas := 0, 0, 0
			for h := uint64(0); reads < 200; h++ {
				if h%6 == 5 {
					p := make([]byte, 32<<10)
					for i := range p {
						p[i] = byte(r.Uint32())
					}
					off := spanEnd + writes*len(p)
					var flags CmdFlags
					if writes%4 == 0 {
						flags, fuas = CmdFlagFUA, fuas+1
					}
					copy(model[off:], p)
					batch = append(AppendRequest(batch, Request{Type: CmdWrite, Flags: flags, Handle: h, Offset: uint64(off), Length: uint32(len(p))}), p...)
					want[h] = nil
					writes++
					continue
				}
				n := sizes[reads%len(sizes)]
				off := r.IntN(spanEnd - n)
				batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: uint64(off), Length: uint32(n)})
				want[h], lens[h], offs[h] = base[off:off+n], n, uint64(off)
				reads++
			}
			c.exchange(batch, want, lens, offs)
			if got := x.content(t, spanEnd, size-spanEnd); !bytes.Equal(got, model[spanEnd:]) {
				t.Fatal("the export does not hold what the WRITEs wrote")
			}
			served := x.spans.Load() + x.cachedReads.Load() + x.readAts.Load()
			if served != int64(reads) {
				t.Fatalf("READs served %d times (sendfile %d, cache %d, ReadAt %d), want %d", served, x.spans.Load(), x.cachedReads.Load(), x.readAts.Load(), reads)
			}
			if x.spans.Load() == 0 {
				t.Error("no READ went by sendfile")
			}
			wantCached, wantWriteAts := int64(writes-fuas), int64(fuas)
			if tc.noCache {
				wantCached, wantWriteAts = 0, int64(writes)
				if x.cachedReads.Load() != 0 {
					t.Error("ReadCached said no, yet READs were counted as cached")
				}
			} else if x.cachedReads.Load() == 0 {
				t.Error("no READ was answered from cache")
			}
			if x.cachedWrites.Load() != wantCached || x.writeAts.Load() != wantWriteAts || x.flushes.Load() != int64(fuas) {
				t.Errorf("WRITEs: %d cached, %d WriteAt, %d Flush; want %d, %d, %d",
					x.cachedWrites.Load(), x.writeAts.Load(), x.flushes.Load(), wantCached, wantWriteAts, fuas)
			}
			c.send(Request{Type: CmdDisc}, nil)
			c.expectClosed()
		})
	}
}

// exchange sends batch and reads a reply for every handle in want, in
// any order: nil for a WRITE, the bytes for a READ (lens and offs as in
// anyReply). The server stops reading requests while its replies are not
// read, so the batch goes from another goroutine.
func (c *client) exchange(batch []byte, want map[uint64][]byte, lens map[uint64]int, offs map[uint64]uint64) {
	c.t.Helper()
	werr := make(chan error, 1)
	go func() { _, err := c.c.Write(batch); werr <- err }()
	for range len(want) {
		h, e, data := c.anyReply(lens, offs)
		w, ok := want[h]
		if !ok {
			c.t.Fatalf("reply for handle %d, which is unknown or was answered before", h)
		}
		delete(want, h)
		if e != 0 || !bytes.Equal(data, w) {
			c.t.Fatalf("handle %d: errno %v, %d bytes, want %d bytes equal to the export's", h, e, len(data), len(w))
		}
	}
	if err := <-werr; err != nil {
		c.t.Fatal(err)
	}
}
