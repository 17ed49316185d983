package nbd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// memExport is an in-memory Export with switches for error paths. Its
// Store hands every READ to a worker, which reads with ReadAt.
type memExport struct {
	mu        sync.RWMutex
	b         []byte
	ro        bool
	multiConn bool
	desc      string
	minBlock  uint32
	revoked   chan struct{}
	flushes   atomic.Int64
	trims     atomic.Int64
	zeroes    atomic.Int64
	failNext  atomic.Pointer[error] // returned by the next write-ish call
	closed    atomic.Bool
}

func (m *memExport) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memExport) fail() error {
	if e := m.failNext.Swap(nil); e != nil {
		return *e
	}
	return nil
}

func (m *memExport) WriteAt(p []byte, off int64) (int, error) {
	if err := m.fail(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.b[off:], p), nil
}

// at returns a copy of n bytes at off, taken under the lock.
func (m *memExport) at(off, n int) []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return bytes.Clone(m.b[off : off+n])
}

func (m *memExport) Info() ExportInfo {
	info := ExportInfo{Size: int64(len(m.b)), ReadOnly: m.ro, MultiConn: m.multiConn, Description: m.desc, Revoked: m.revoked}
	if m.minBlock != 0 {
		info.MinBlock, info.PreferredBlock, info.MaxBlock = m.minBlock, 4096, 1<<20
	}
	return info
}

func (m *memExport) ReadNow([]byte, int64, bool) (Span, bool) { return Span{}, false }
func (m *memExport) WriteNow([]byte, int64) bool              { return false }
func (m *memExport) ReadSpan(p []byte, off int64) (Span, error) {
	if err := ReadFull(m, p, off); err != nil {
		return Span{}, err
	}
	return Span{Bytes: p}, nil
}

func (m *memExport) Flush() error { m.flushes.Add(1); return m.fail() }
func (m *memExport) Trim(off, n int64) error {
	m.trims.Add(1)
	return m.fail()
}
func (m *memExport) WriteZeroes(off, n int64, noHole bool) error {
	m.zeroes.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.b[off : off+n])
	return nil
}
func (m *memExport) Close() error { m.closed.Store(true); return nil }

// sharedExport is served to many clients: its Close does nothing.
type sharedExport struct{ *memExport }

func (sharedExport) Close() error { return nil }

// memExports is a policy over a fixed set of exports. Names in refuse
// exist but are refused, like a wrong per-boot secret.
type memExports struct {
	m      map[string]*memExport
	refuse map[string]bool
}

func (e *memExports) Lookup(name string, remote net.Addr) (Export, error) {
	if e.refuse[name] {
		return nil, ErrRefused
	}
	x, ok := e.m[name]
	if !ok {
		return nil, ErrUnknownExport
	}
	return sharedExport{x}, nil
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

type hookFunc func(SessionStats)

func (f hookFunc) OnSession(s SessionStats) { f(s) }

type harness struct {
	addr     string
	exports  *memExports
	logs     *testutil.SyncBuffer
	sessions chan SessionStats
}

// startServer serves fresh exports on a loopback port until the test ends.
func startServer(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{
		exports: &memExports{
			m: map[string]*memExport{
				"ro":      {b: pattern(1 << 20), ro: true, desc: "read-only base"},
				"rw":      {b: pattern(1 << 20)},
				"aligned": {b: pattern(64 << 10), minBlock: 512},
			},
			refuse: map[string]bool{"secret": true},
		},
		logs:     &testutil.SyncBuffer{},
		sessions: make(chan SessionStats, 16),
	}
	cfg.Hook = hookFunc(func(s SessionStats) {
		select {
		case h.sessions <- s:
		default: // tests that do not read stats must not block the server
		}
	})
	h.addr = serve(t, cfg, h.exports, h.logs)
	return h
}

// serve runs a server for exports on a loopback port until the test ends,
// logging into logs, which it prints if the test failed.
func serve(t *testing.T, cfg Config, exports Exports, logs *testutil.SyncBuffer) string {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := NewServer(exports, cfg)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5 s of cancel")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return ln.Addr().String()
}

// client is a minimal NBD client for tests, strict about what it reads.
type client struct {
	t          *testing.T
	c          net.Conn
	r          *bufio.Reader
	structured bool
	size       uint64
	flags      TransmissionFlags
}

func dial(t *testing.T, addr string, cflags ClientFlags) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	cl := &client{t: t, c: c, r: bufio.NewReader(c)}
	g := cl.read(GreetingLen)
	hf, err := ParseGreeting(g)
	if err != nil {
		t.Fatal(err)
	}
	if hf != FlagFixedNewstyle|FlagNoZeroes {
		t.Fatalf("handshake flags: got %#x, want FIXED_NEWSTYLE|NO_ZEROES", hf)
	}
	cl.write([]byte{byte(cflags >> 24), byte(cflags >> 16), byte(cflags >> 8), byte(cflags)})
	return cl
}

func (c *client) read(n int) []byte {
	c.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// expectClosed asserts the server hangs up (EOF or reset) promptly.
func (c *client) expectClosed() {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("server did not close the connection")
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("waiting for close: %v", err)
	}
}

func (c *client) option(o Option, data []byte) {
	c.t.Helper()
	c.write(AppendOption(nil, o, data))
}

func (c *client) optReply(o Option) (ReplyType, []byte) {
	c.t.Helper()
	h, err := ParseOptionReplyHeader(c.read(OptionReplyHeaderLen))
	if err != nil {
		c.t.Fatal(err)
	}
	if h.Option != o {
		c.t.Fatalf("option reply for %v, want %v", h.Option, o)
	}
	return h.Type, c.read(int(h.Length))
}

// info sends NBD_OPT_INFO or NBD_OPT_GO and collects the replies up to the
// final ACK or error.
func (c *client) info(o Option, name string, items ...InfoType) ([]Info, ReplyType) {
	c.t.Helper()
	c.option(o, AppendInfoRequest(nil, InfoRequest{Name: name, Infos: items}))
	var infos []Info
	for {
		t, data := c.optReply(o)
		if t != RepInfo {
			if t == RepAck && o == OptGo {
				c.size, c.flags = infos[0].Size, infos[0].Flags
			}
			return infos, t
		}
		in, err := ParseInfo(data)
		if err != nil {
			c.t.Fatal(err)
		}
		infos = append(infos, in)
	}
}

// open negotiates (optionally) structured replies and GOes to name.
func (c *client) open(name string, structured bool) {
	c.t.Helper()
	if structured {
		c.option(OptStructuredReply, nil)
		if t, _ := c.optReply(OptStructuredReply); t != RepAck {
			c.t.Fatalf("STRUCTURED_REPLY: got reply %#x, want ACK", t)
		}
		c.structured = true
	}
	if _, t := c.info(OptGo, name, InfoBlockSize); t != RepAck {
		c.t.Fatalf("GO %q: got reply %#x, want ACK", name, t)
	}
}

func (c *client) send(r Request, payload []byte) {
	c.t.Helper()
	c.write(append(AppendRequest(nil, r), payload...))
}

// reply reads one reply; for a successful READ, n data bytes.
func (c *client) reply(n int) (handle uint64, e Errno, data []byte) {
	c.t.Helper()
	if !c.structured {
		h, e, err := ParseSimpleReply(c.read(SimpleReplyLen))
		if err != nil {
			c.t.Fatal(err)
		}
		if e == 0 && n > 0 {
			data = c.read(n)
		}
		return h, e, data
	}
	for {
		ch, err := ParseChunkHeader(c.read(ChunkHeaderLen))
		if err != nil {
			// Simple replies are allowed for non-READ commands.
			c.t.Fatal(err)
		}
		payload := c.read(int(ch.Length))
		switch ch.Type {
		case ChunkOffsetData:
			data = append(data, payload[8:]...)
		case ChunkError:
			e, _, err = ParseErrorChunk(payload)
			if err != nil {
				c.t.Fatal(err)
			}
		case ChunkNone:
		default:
			c.t.Fatalf("unexpected chunk type %#x", ch.Type)
		}
		if ch.Flags&ReplyFlagDone != 0 {
			return ch.Handle, e, data
		}
	}
}

// replyAny reads a reply that may be simple even with structured replies
// (non-READ commands).
func (c *client) replyAny() (uint64, Errno) {
	c.t.Helper()
	magic, err := c.r.Peek(4)
	if err != nil {
		c.t.Fatal(err)
	}
	if magic[0] == 0x67 { // simple reply magic 0x67446698
		s := c.structured
		c.structured = false
		h, e, _ := c.reply(0)
		c.structured = s
		return h, e
	}
	h, e, _ := c.reply(0)
	return h, e
}
