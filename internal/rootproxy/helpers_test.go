package rootproxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// memExport is an upstream server's export: bytes in memory, with the
// bytes read counted, so a test sees what reached the server.
type memExport struct {
	mu       sync.Mutex
	data     []byte
	readOnly bool
	read     atomic.Int64
}

func newMemExport(size int, seed uint64) *memExport {
	e := &memExport{data: make([]byte, size)}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range e.data {
		e.data[i] = byte(rng.Uint32())
	}
	return e
}

func (e *memExport) Info() nbd.ExportInfo {
	return nbd.ExportInfo{Size: int64(len(e.data)), ReadOnly: e.readOnly, MinBlock: 512}
}
func (e *memExport) ReadNow([]byte, int64, bool) (nbd.Span, bool) { return nbd.Span{}, false }
func (e *memExport) ReadSpan(p []byte, off int64) (nbd.Span, error) {
	e.mu.Lock()
	copy(p, e.data[off:])
	e.mu.Unlock()
	e.read.Add(int64(len(p)))
	return nbd.Span{Bytes: p}, nil
}
func (e *memExport) WriteNow([]byte, int64) bool { return false }
func (e *memExport) WriteAt(p []byte, off int64) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return copy(e.data[off:], p), nil
}
func (e *memExport) Flush() error            { return nil }
func (e *memExport) Trim(off, n int64) error { return nil }
func (e *memExport) WriteZeroes(off, n int64, _ bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.data[off : off+n])
	return nil
}
func (e *memExport) Close() error { return nil }

func (e *memExport) snapshot() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]byte(nil), e.data...)
}

type oneExport struct{ e nbd.Export }

func (o oneExport) Lookup(string, net.Addr) (nbd.Export, error) { return o.e, nil }

// upstreamServer serves e over TCP on loopback until stop or the test ends.
type upstreamServer struct {
	addr string
	stop context.CancelFunc
	done chan struct{}
}

func serveUpstream(t *testing.T, e nbd.Export) *upstreamServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &upstreamServer{addr: ln.Addr().String(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		nbd.NewServer(oneExport{e}, nbd.Config{ShutdownGrace: time.Millisecond}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// kill stops the server at once, its sessions cut.
func (s *upstreamServer) kill() { s.stop(); <-s.done }

// dialer rotates over addrs, as the agent's watcher does, with a short
// pause after each round.
func dialer(addrs ...string) Dial {
	return func(ctx context.Context, attempt int) (net.Conn, nbd.Negotiated, string, error) {
		a := addrs[(attempt-1)%len(addrs)]
		if attempt > len(addrs) && (attempt-1)%len(addrs) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			return nil, nbd.Negotiated{}, a, err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		info, err := nbd.ClientHandshake(c, "any")
		if err != nil {
			c.Close()
			return nil, nbd.Negotiated{}, a, err
		}
		c.SetDeadline(time.Time{})
		return c, info, a, nil
	}
}

// kernel stands for the kernel's NBD client: it holds the other end of a
// unix socket the proxy serves, after the handshake the agent runs.
type kernel struct {
	conn net.Conn
	info nbd.Negotiated
	h    uint64
}

func attachKernel(t *testing.T, p *Proxy) *kernel {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, srv, nbd.Config{}) }()
	t.Cleanup(func() {
		client.Close()
		cancel()
		<-done
	})
	client.SetDeadline(time.Now().Add(5 * time.Second))
	info, err := nbd.ClientHandshake(client, ExportName)
	if err != nil {
		t.Fatal(err)
	}
	client.SetDeadline(time.Time{})
	return &kernel{conn: client, info: info}
}

// do sends one request and reads its simple reply.
func (k *kernel) do(typ nbd.Command, off int64, data []byte, n int) ([]byte, error) {
	k.h++
	req := nbd.AppendRequest(nil, nbd.Request{Type: typ, Handle: k.h, Offset: uint64(off), Length: uint32(n)})
	if typ == nbd.CmdWrite {
		req = append(req, data...)
	}
	k.conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := k.conn.Write(req); err != nil {
		return nil, err
	}
	var hdr [nbd.SimpleReplyLen]byte
	if _, err := readFull(k.conn, hdr[:]); err != nil {
		return nil, err
	}
	h, errno, err := nbd.ParseSimpleReply(hdr[:])
	if err != nil || h != k.h {
		return nil, fmt.Errorf("reply handle %d, want %d: %v", h, k.h, err)
	}
	if errno != 0 {
		return nil, fmt.Errorf("errno %v", errno)
	}
	if typ != nbd.CmdRead {
		return nil, nil
	}
	b := make([]byte, n)
	_, err = readFull(k.conn, b)
	return b, err
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
