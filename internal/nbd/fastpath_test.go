package nbd

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

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

// TestReadAnswers sends one READ for each kind of answer the Store can
// give and checks the bytes the client gets and who answered.
func TestReadAnswers(t *testing.T) {
	const size = 8 << 20
	base := pattern(size) // the race detector makes pattern slow: once per test
	for _, tc := range []struct {
		name       string
		off, n     int64
		now, later answer
	}{
		{name: "4 KiB into the buffer on the loop", off: 777, n: 4096, now: fillP},
		{name: "4 MiB and 3 bytes into the buffer on the loop", off: 1000, n: 4<<20 + 3, now: fillP},
		{name: "own bytes on the loop", off: 4096, n: 128 << 10, now: ownBytes},
		{name: "64 KiB file span, unaligned", off: 12345, n: 64 << 10, now: fileSpan},
		{name: "4 MiB and 3 bytes by file span", off: 1000, n: 4<<20 + 3, now: fileSpan},
		{name: "file span to the end of the export", off: size - 100<<10, n: 100 << 10, now: fileSpan},
		{name: "worker fills the buffer", off: 1 << 20, n: 256 << 10, now: toWorker, later: fillP},
		{name: "worker answers with own bytes, odd length", off: 3 << 20, n: 100001, now: toWorker, later: ownBytes},
		{name: "zero-length READ asks the store nothing", off: 4096, n: 0},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newFakeStore(t, base)
				x.now, x.later = always(tc.now), always(tc.later)
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
				var wantNow, wantLater [answers]int64
				if tc.n > 0 {
					wantNow[tc.now] = 1
					if tc.now == toWorker {
						wantLater[tc.later] = 1
					}
				}
				if now, later := x.counts(); now != wantNow || later != wantLater {
					t.Fatalf("answers (fillP, ownBytes, fileSpan, toWorker, failRead): ReadNow %v and ReadSpan %v, want %v and %v", now, later, wantNow, wantLater)
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

// A READ that fails on the worker gets EIO, and the session goes on.
func TestReadSpanError(t *testing.T) {
	base := pattern(1 << 20)
	x := newFakeStore(t, base)
	x.now = always(toWorker)
	x.later = func(off, n int64) answer {
		if off == 0 {
			return fillP
		}
		return failRead
	}
	c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
	c.open("disk", true)
	c.send(Request{Type: CmdRead, Handle: 1, Offset: 64 << 10, Length: 256 << 10}, nil)
	if h, e, _ := c.reply(256 << 10); h != 1 || e != EIO {
		t.Fatalf("READ the store failed: handle %d errno %v, want EIO", h, e)
	}
	c.send(Request{Type: CmdRead, Handle: 2, Offset: 0, Length: 256 << 10}, nil)
	if h, e, data := c.reply(256 << 10); h != 2 || e != 0 || !bytes.Equal(data, base[:256<<10]) {
		t.Fatalf("READ after the failed one: handle %d errno %v", h, e)
	}
}

// Without a socket to sendfile to (net.Pipe), the server must tell the
// Store that file spans cannot be sent.
func TestFastPathWithoutSendfile(t *testing.T) {
	for _, structured := range []bool{false, true} {
		t.Run("structured="+strconv.FormatBool(structured), func(t *testing.T) {
			base := pattern(1 << 20)
			x := newFakeStore(t, base)
			x.now = always(fileSpan)
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
			if now, _ := x.counts(); x.noFiles.Load() != 1 || now[fileSpan] != 0 || now[fillP] != 1 {
				t.Fatalf("over a pipe: %d ReadNow calls without files, answers %v; want 1, and the buffer filled", x.noFiles.Load(), now)
			}
			c.send(Request{Type: CmdDisc}, nil)
			<-done
		})
	}
}

func TestFastPathWrites(t *testing.T) {
	const size, readEnd = 1 << 20, 512 << 10
	base := pattern(size)
	for _, tc := range []struct {
		name                string
		flags               CmdFlags
		writeNow            int32
		taken, writeAts, fl int64
	}{
		{name: "no FUA: taken on the loop", taken: 1},
		{name: "FUA: WriteAt then Flush", flags: CmdFlagFUA, writeAts: 1, fl: 1},
		{name: "WriteNow says no: WriteAt", writeNow: refuseWrite, writeAts: 1},
		{name: "WriteNow half done: WriteAt completes it", writeNow: halfWrite, writeAts: 1},
	} {
		for _, structured := range []bool{false, true} {
			t.Run(tc.name+"/structured="+strconv.FormatBool(structured), func(t *testing.T) {
				x := newFakeStore(t, base)
				x.writeNow.Store(tc.writeNow)
				c := dial(t, serveExport(t, Config{}, x), ClientFixedNewstyle|ClientNoZeroes)
				c.open("disk", structured)
				data := bytes.Repeat([]byte("fast path "), 3000)
				off := int64(readEnd + 4321)
				c.send(Request{Type: CmdWrite, Flags: tc.flags, Handle: 7, Offset: uint64(off), Length: uint32(len(data))}, data)
				if h, e := c.replyAny(); h != 7 || e != 0 {
					t.Fatalf("WRITE reply: handle %d errno %v", h, e)
				}
				got := [3]int64{x.writesNow.Load(), x.writeAts.Load(), x.flushes.Load()}
				if want := [3]int64{tc.taken, tc.writeAts, tc.fl}; got != want {
					t.Fatalf("paths taken (WriteNow, WriteAt, Flush): got %v, want %v", got, want)
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
// waiting, many more than the session has workers, so the request loop
// answers some while workers answer others, and checks that every
// request gets exactly one reply with the right data.
func TestFastPathPipelined(t *testing.T) {
	const size, readEnd = 8 << 20, 4 << 20 // READs below readEnd, WRITEs above
	sizes := []int{512, 4096, 64 << 10, 100000, 300000, 8191, 1 << 20}
	base := pattern(size)
	// mixed answers large READs every way and sends some small ones to a
	// worker too.
	mixed := func(off, n int64) answer {
		if n >= 64<<10 {
			return []answer{fileSpan, ownBytes, toWorker}[off%3]
		}
		return []answer{fillP, fillP, toWorker}[off%3]
	}
	bySize := func(off, n int64) answer {
		if n >= 64<<10 {
			return ownBytes
		}
		return fillP
	}
	for _, tc := range []struct {
		name       string
		structured bool
		workers    int
		mixed      bool // ReadNow answers every way; else it sends all to workers
		writeNow   int32
	}{
		{"simple", false, 4, true, takeWrite},
		{"structured", true, 4, true, takeWrite},
		{"structured, all to 2 workers, WriteNow says no", true, 2, false, refuseWrite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newFakeStore(t, base)
			x.now, x.later = always(toWorker), bySize
			if tc.mixed {
				x.now = mixed
			}
			x.writeNow.Store(tc.writeNow)
			c := dial(t, serveExport(t, Config{MaxInFlight: tc.workers}, x), ClientFixedNewstyle|ClientNoZeroes)
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
					off := readEnd + writes*len(p)
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
				off := r.IntN(readEnd - n)
				batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: uint64(off), Length: uint32(n)})
				want[h], lens[h], offs[h] = base[off:off+n], n, uint64(off)
				reads++
			}
			c.exchange(batch, want, lens, offs)
			if got := x.content(t, readEnd, size-readEnd); !bytes.Equal(got, model[readEnd:]) {
				t.Fatal("the export does not hold what the WRITEs wrote")
			}
			now, later := x.counts()
			var onLoop, byWorker int64
			for a := range answers {
				if a != toWorker {
					onLoop += now[a]
				}
				byWorker += later[a]
			}
			if onLoop+byWorker != int64(reads) || byWorker != now[toWorker] {
				t.Fatalf("READs: ReadNow answered %v, ReadSpan %v; want %d in all, and a ReadSpan for every READ ReadNow sent to a worker", now, later, reads)
			}
			if tc.mixed && (now[fileSpan] == 0 || now[ownBytes] == 0 || now[fillP] == 0 || later[ownBytes] == 0 || later[fillP] == 0) {
				t.Errorf("READ answers %v on the loop and %v on workers: want every kind of answer", now, later)
			}
			wantTaken, wantWriteAts := int64(writes-fuas), int64(fuas)
			if tc.writeNow == refuseWrite {
				wantTaken, wantWriteAts = 0, int64(writes)
			}
			if x.writesNow.Load() != wantTaken || x.writeAts.Load() != wantWriteAts || x.flushes.Load() != int64(fuas) {
				t.Errorf("WRITEs: %d taken on the loop, %d WriteAt, %d Flush; want %d, %d, %d",
					x.writesNow.Load(), x.writeAts.Load(), x.flushes.Load(), wantTaken, wantWriteAts, fuas)
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
