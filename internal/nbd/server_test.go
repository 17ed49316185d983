package nbd

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	h := startServer(t, Config{})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *client)
	}{
		{"LIST is refused: export names are secrets", func(t *testing.T, c *client) {
			c.option(OptList, nil)
			if typ, _ := c.optReply(OptList); typ != RepErrPolicy {
				t.Fatalf("LIST reply %#x, want ERR_POLICY", typ)
			}
		}},
		{"LIST with data is invalid", func(t *testing.T, c *client) {
			c.option(OptList, []byte("x"))
			if typ, _ := c.optReply(OptList); typ != RepErrInvalid {
				t.Fatalf("got %#x, want ERR_INVALID", typ)
			}
		}},
		{"INFO all items", func(t *testing.T, c *client) {
			infos, typ := c.info(OptInfo, "ro", InfoName, InfoDescription, InfoBlockSize)
			if typ != RepAck {
				t.Fatalf("INFO: final reply %#x, want ACK", typ)
			}
			want := []Info{
				{Type: InfoExport, Size: 1 << 20, Flags: FlagHasFlags | FlagReadOnly | FlagSendFlush | FlagSendFUA | FlagCanMultiConn},
				{Type: InfoName, Text: "ro"},
				{Type: InfoDescription, Text: "read-only base"},
				{Type: InfoBlockSize, MinBlock: 1, PreferredBlock: 4096, MaxBlock: MaxPayload},
			}
			if len(infos) != len(want) {
				t.Fatalf("INFO: got %+v, want %+v", infos, want)
			}
			for i := range want {
				if infos[i] != want[i] {
					t.Errorf("INFO item %d: got %+v, want %+v", i, infos[i], want[i])
				}
			}
			// INFO does not end the handshake: GO still works.
			c.open("rw", false)
			if c.flags != FlagHasFlags|FlagSendFlush|FlagSendFUA|FlagSendTrim|FlagSendWriteZeroes {
				t.Fatalf("rw flags: got %#x", c.flags)
			}
		}},
		{"INFO unknown export", func(t *testing.T, c *client) {
			if _, typ := c.info(OptInfo, "nope"); typ != RepErrUnknown {
				t.Fatalf("got %#x, want ERR_UNKNOWN", typ)
			}
		}},
		{"GO refused by policy", func(t *testing.T, c *client) {
			if _, typ := c.info(OptGo, "secret"); typ != RepErrPolicy {
				t.Fatalf("got %#x, want ERR_POLICY", typ)
			}
			// The client may try again.
			c.open("ro", false)
		}},
		{"GO malformed", func(t *testing.T, c *client) {
			c.option(OptGo, []byte{0, 0, 0, 200, 'x'})
			if typ, _ := c.optReply(OptGo); typ != RepErrInvalid {
				t.Fatalf("got %#x, want ERR_INVALID", typ)
			}
		}},
		{"GO needs block size", func(t *testing.T, c *client) {
			if _, typ := c.info(OptGo, "aligned"); typ != RepErrBlockSizeRq {
				t.Fatalf("got %#x, want ERR_BLOCK_SIZE_REQD", typ)
			}
		}},
		{"unsupported options", func(t *testing.T, c *client) {
			for _, o := range []Option{OptStartTLS, 10, 11, 12, 0xdead} {
				c.option(o, []byte{1, 2, 3})
				if typ, _ := c.optReply(o); typ != RepErrUnsup {
					t.Fatalf("%v: got %#x, want ERR_UNSUP", o, typ)
				}
			}
		}},
		{"STRUCTURED_REPLY with data", func(t *testing.T, c *client) {
			c.option(OptStructuredReply, []byte{0})
			if typ, _ := c.optReply(OptStructuredReply); typ != RepErrInvalid {
				t.Fatalf("got %#x, want ERR_INVALID", typ)
			}
		}},
		{"ABORT", func(t *testing.T, c *client) {
			c.option(OptAbort, nil)
			if typ, _ := c.optReply(OptAbort); typ != RepAck {
				t.Fatalf("got %#x, want ACK", typ)
			}
			c.expectClosed()
		}},
		{"EXPORT_NAME", func(t *testing.T, c *client) {
			c.option(OptExportName, []byte("rw"))
			size, flags, err := ParseExportNameReply(c.read(10)) // NO_ZEROES: no padding
			if err != nil || size != 1<<20 || flags&FlagSendTrim == 0 {
				t.Fatalf("EXPORT_NAME reply: size %d flags %#x err %v", size, flags, err)
			}
			c.send(Request{Type: CmdRead, Handle: 9, Length: 8}, nil)
			if hd, e, d := c.reply(8); hd != 9 || e != 0 || !bytes.Equal(d, pattern(8)) {
				t.Fatalf("READ after EXPORT_NAME: handle %d errno %v", hd, e)
			}
		}},
		{"EXPORT_NAME unknown closes", func(t *testing.T, c *client) {
			c.option(OptExportName, []byte("nope"))
			c.expectClosed()
		}},
		{"bad option magic closes", func(t *testing.T, c *client) {
			c.write(bytes.Repeat([]byte{0x42}, OptionHeaderLen))
			c.expectClosed()
		}},
		{"oversized option closes", func(t *testing.T, c *client) {
			c.write(AppendOption(nil, OptGo, nil)[:12])
			c.write([]byte{0xff, 0xff, 0xff, 0xff})
			c.expectClosed()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, dial(t, h.addr, ClientFixedNewstyle|ClientNoZeroes))
		})
	}
	t.Run("zero padding without NO_ZEROES", func(t *testing.T) {
		c := dial(t, h.addr, ClientFixedNewstyle)
		c.option(OptExportName, []byte("ro"))
		b := c.read(10 + 124)
		if !bytes.Equal(b[10:], make([]byte, 124)) {
			t.Fatal("padding is not 124 zero bytes")
		}
	})
	t.Run("unknown client flags close", func(t *testing.T) {
		dial(t, h.addr, 1<<7).expectClosed()
	})
	if !strings.Contains(h.logs.String(), "protocol violation") {
		t.Error("no log line for the protocol violations")
	}
}

func TestCommands(t *testing.T) {
	for _, structured := range []bool{false, true} {
		name := "simple"
		if structured {
			name = "structured"
		}
		t.Run(name, func(t *testing.T) {
			h := startServer(t, Config{})
			rw, ro := h.exports.m["rw"], h.exports.m["ro"]
			size := uint64(1 << 20)
			data := bytes.Repeat([]byte{0xab}, 4096)
			enospc := error(&errWrap{syscall.ENOSPC})
			for _, tc := range []struct {
				name    string
				export  string
				req     Request
				payload []byte
				setup   func()
				want    Errno
				check   func(t *testing.T, got []byte)
			}{
				{name: "read", export: "ro", req: Request{Type: CmdRead, Offset: 4096, Length: 65536},
					check: func(t *testing.T, got []byte) {
						if !bytes.Equal(got, pattern(1 << 20)[4096:4096+65536]) {
							t.Fatal("READ data differs")
						}
					}},
				{name: "read zero length", export: "ro", req: Request{Type: CmdRead, Offset: 0, Length: 0}},
				{name: "read with FUA is fine", export: "ro", req: Request{Type: CmdRead, Flags: CmdFlagFUA, Length: 1}},
				{name: "write", export: "rw", req: Request{Type: CmdWrite, Offset: 8192, Length: 4096}, payload: data,
					check: func(*testing.T, []byte) {
						if !bytes.Equal(rw.at(8192, 4096), data) {
							t.Fatal("WRITE did not reach the export")
						}
					}},
				{name: "write FUA flushes", export: "rw", req: Request{Type: CmdWrite, Flags: CmdFlagFUA, Offset: 0, Length: 4096}, payload: data,
					setup: func() { rw.flushes.Store(0) },
					check: func(t *testing.T, _ []byte) {
						if rw.flushes.Load() != 1 {
							t.Fatalf("flushes after FUA write: %d, want 1", rw.flushes.Load())
						}
					}},
				{name: "flush", export: "rw", req: Request{Type: CmdFlush}},
				{name: "trim", export: "rw", req: Request{Type: CmdTrim, Offset: 0, Length: 8192},
					setup: func() { rw.trims.Store(0) },
					check: func(t *testing.T, _ []byte) {
						if rw.trims.Load() != 1 {
							t.Fatal("TRIM did not reach the export")
						}
					}},
				{name: "write zeroes no hole", export: "rw", req: Request{Type: CmdWriteZeroes, Flags: CmdFlagNoHole, Offset: 8192, Length: 4096},
					check: func(t *testing.T, _ []byte) {
						if !bytes.Equal(rw.at(8192, 4096), make([]byte, 4096)) {
							t.Fatal("WRITE_ZEROES did not zero")
						}
					}},
				{name: "write to read-only", export: "ro", req: Request{Type: CmdWrite, Length: 4096}, payload: data, want: EPERM,
					check: func(t *testing.T, _ []byte) {
						if ro.at(0, 1)[0] == 0xab {
							t.Fatal("read-only export was written")
						}
					}},
				{name: "trim read-only", export: "ro", req: Request{Type: CmdTrim, Length: 4096}, want: EPERM},
				{name: "write zeroes read-only", export: "ro", req: Request{Type: CmdWriteZeroes, Length: 4096}, want: EPERM},
				{name: "read out of range", export: "ro", req: Request{Type: CmdRead, Offset: size - 10, Length: 20}, want: EINVAL},
				{name: "read offset overflow", export: "ro", req: Request{Type: CmdRead, Offset: 1<<64 - 4, Length: 8}, want: EINVAL},
				{name: "trim out of range", export: "rw", req: Request{Type: CmdTrim, Offset: size, Length: 1}, want: EINVAL},
				{name: "write out of range", export: "rw", req: Request{Type: CmdWrite, Offset: size - 1, Length: 2}, payload: []byte{1, 2}, want: ENOSPC},
				{name: "read too long", export: "ro", req: Request{Type: CmdRead, Length: MaxPayload + 1}, want: EINVAL},
				{name: "misaligned read", export: "aligned", req: Request{Type: CmdRead, Offset: 100, Length: 512}, want: EINVAL},
				{name: "aligned read", export: "aligned", req: Request{Type: CmdRead, Offset: 512, Length: 512}},
				{name: "unknown command", export: "rw", req: Request{Type: 42}, want: EINVAL},
				{name: "block status not negotiated", export: "rw", req: Request{Type: CmdBlockStatus, Length: 512}, want: EINVAL},
				{name: "bad flag", export: "rw", req: Request{Type: CmdWrite, Flags: CmdFlagNoHole, Length: 1}, payload: []byte{1}, want: EINVAL},
				{name: "export ENOSPC", export: "rw", req: Request{Type: CmdWrite, Length: 4096}, payload: data,
					setup: func() { rw.failNext.Store(&enospc) }, want: ENOSPC},
				{name: "export EIO on flush", export: "rw", req: Request{Type: CmdFlush},
					setup: func() { e := errors.New("disk on fire"); rw.failNext.Store(&e) }, want: EIO},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if tc.setup != nil {
						tc.setup()
					}
					c := dial(t, h.addr, ClientFixedNewstyle|ClientNoZeroes)
					c.open(tc.export, structured)
					tc.req.Handle = 0x1234
					c.send(tc.req, tc.payload)
					n := 0
					if tc.req.Type == CmdRead && tc.want == 0 {
						n = int(tc.req.Length)
					}
					var (
						hd  uint64
						e   Errno
						got []byte
					)
					if tc.req.Type == CmdRead {
						hd, e, got = c.reply(n)
					} else {
						hd, e = c.replyAny()
					}
					if hd != 0x1234 || e != tc.want {
						t.Fatalf("reply: handle %#x errno %v, want %#x %v", hd, e, 0x1234, tc.want)
					}
					if tc.check != nil {
						tc.check(t, got)
					}
					// The connection survives an error reply.
					c.send(Request{Type: CmdRead, Handle: 7, Length: 512}, nil)
					if hd, e, _ := c.reply(512); hd != 7 || e != 0 {
						t.Fatalf("READ after %s: handle %d errno %v", tc.name, hd, e)
					}
					c.send(Request{Type: CmdDisc}, nil)
					c.expectClosed()
				})
			}
		})
	}
}

type errWrap struct{ err error }

func (e *errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e *errWrap) Unwrap() error { return e.err }

func TestPipelinedReads(t *testing.T) {
	h := startServer(t, Config{MaxInFlight: 4})
	c := dial(t, h.addr, ClientFixedNewstyle|ClientNoZeroes)
	c.open("ro", true)
	const n = 64
	var batch []byte
	for i := range n {
		batch = AppendRequest(batch, Request{Type: CmdRead, Handle: uint64(i), Offset: uint64(i) * 4096, Length: 4096})
	}
	c.write(batch)
	seen := map[uint64]bool{}
	want := pattern(1 << 20)
	for range n {
		hd, e, d := c.reply(4096)
		if e != 0 || seen[hd] || hd >= n {
			t.Fatalf("reply handle %d errno %v (seen before: %v)", hd, e, seen[hd])
		}
		seen[hd] = true
		if !bytes.Equal(d, want[hd*4096:(hd+1)*4096]) {
			t.Fatalf("handle %d: wrong data", hd)
		}
	}
	c.send(Request{Type: CmdDisc}, nil)
	c.expectClosed()
	s := <-h.sessions
	if s.Export != "ro" || s.Ops != n || s.BytesRead != n*4096 || s.Err != nil {
		t.Fatalf("session stats: %+v", s)
	}
}

func TestBadRequestMagicCloses(t *testing.T) {
	h := startServer(t, Config{})
	c := dial(t, h.addr, ClientFixedNewstyle|ClientNoZeroes)
	c.open("rw", false)
	c.write(bytes.Repeat([]byte{0xee}, RequestLen))
	c.expectClosed()
	if s := <-h.sessions; s.Err == nil {
		t.Fatal("session stats: want an error for the bad magic")
	}
}

func TestOversizedWriteCloses(t *testing.T) {
	h := startServer(t, Config{})
	c := dial(t, h.addr, ClientFixedNewstyle|ClientNoZeroes)
	c.open("rw", false)
	c.send(Request{Type: CmdWrite, Length: MaxPayload + 1}, nil)
	c.expectClosed()
}

func TestHandshakeTimeout(t *testing.T) {
	h := startServer(t, Config{HandshakeTimeout: 200 * time.Millisecond})
	c := dial(t, h.addr, ClientFixedNewstyle)
	c.expectClosed()
	if s := <-h.sessions; s.Err == nil || !strings.Contains(s.Err.Error(), "handshake") {
		t.Fatalf("session error: got %v, want a handshake timeout", s.Err)
	}
}

func TestExportClosedAtSessionEnd(t *testing.T) {
	x := &memExport{b: make([]byte, 4096)}
	e := &closingExports{x: x}
	srv := NewServer(e, Config{})
	a, b := netPipe()
	done := make(chan struct{})
	go func() { srv.serveConn(t.Context(), a, func() {}); close(done) }()
	c := &client{t: t, c: b, r: newReader(b)}
	c.read(GreetingLen)
	c.write([]byte{0, 0, 0, 3})
	c.open("", false)
	c.send(Request{Type: CmdDisc}, nil)
	<-done
	if !x.closed.Load() {
		t.Fatal("export not closed at session end")
	}
}

type closingExports struct{ x *memExport }

func (e *closingExports) Lookup(string, netAddr) (Export, error) { return e.x, nil }
