package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// memExport is a read-write in-memory nbd.Export.
type memExport struct {
	mu sync.RWMutex
	b  []byte
}

func (m *memExport) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return copy(p, m.b[off:]), nil
}

func (m *memExport) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.b[off:], p), nil
}
func (m *memExport) Info() nbd.ExportInfo {
	return nbd.ExportInfo{Size: int64(len(m.b)), MinBlock: 1024, PreferredBlock: 4096, MaxBlock: 1 << 20}
}
func (m *memExport) ReadNow([]byte, int64, bool) (nbd.Span, bool) { return nbd.Span{}, false }
func (m *memExport) WriteNow([]byte, int64) bool                  { return false }
func (m *memExport) ReadSpan(p []byte, off int64) (nbd.Span, error) {
	_, err := m.ReadAt(p, off)
	return nbd.Span{Bytes: p}, err
}
func (m *memExport) Flush() error                           { return nil }
func (m *memExport) Trim(off, n int64) error                { return nil }
func (m *memExport) WriteZeroes(off, n int64, _ bool) error { return nil }
func (m *memExport) Close() error                           { return nil }

type oneExport struct {
	name string
	exp  *memExport
}

func (o oneExport) Lookup(name string, _ net.Addr) (nbd.Export, error) {
	if name != o.name {
		return nil, nbd.ErrUnknownExport
	}
	return o.exp, nil
}

// TestHandshakeBootfleetServer runs the handshake against internal/nbd's
// server, then reads a block the way the kernel will: a simple reply.
func TestHandshakeBootfleetServer(t *testing.T) {
	exp := &memExport{b: make([]byte, 1<<20)}
	copy(exp.b[4096:], "hello")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nbd.NewServer(oneExport{"s3cret", exp}, nbd.Config{}).Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, tc := range []struct {
		export  string
		wantErr string
	}{
		{export: "s3cret"},
		{export: "wrong", wantErr: "server refused export"},
	} {
		t.Run(tc.export, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			info, err := Handshake(c, tc.export)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Handshake(%q) = %+v, %v; want error containing %q", tc.export, info, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != 1<<20 || info.Flags&nbd.FlagHasFlags == 0 || info.Flags&nbd.FlagReadOnly != 0 ||
				info.MinBlock != 1024 || info.PreferredBlock != 4096 || info.KernelBlockSize() != 1024 {
				t.Fatalf("Handshake = %+v (kernel block %d); want size 1 MiB, writable, blocks 1024/4096", info, info.KernelBlockSize())
			}
			c.Write(nbd.AppendRequest(nil, nbd.Request{Type: nbd.CmdRead, Handle: 7, Offset: 4096, Length: 1024}))
			reply := make([]byte, 16+1024)
			if _, err := io.ReadFull(c, reply); err != nil {
				t.Fatal(err)
			}
			h, e, err := nbd.ParseSimpleReply(reply)
			if err != nil || h != 7 || e != 0 || string(reply[16:21]) != "hello" {
				t.Fatalf("read after handshake: handle %d errno %v err %v data %q; want a simple reply with hello", h, e, err, reply[16:21])
			}
		})
	}
}

// fakeServer answers a scripted handshake on one end of a pipe.
func fakeServer(t *testing.T, script func(c net.Conn)) net.Conn {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		script(b)
	}()
	t.Cleanup(func() { a.Close() })
	a.SetDeadline(time.Now().Add(5 * time.Second))
	return a
}

func readOpt(c net.Conn) (nbd.OptionHeader, []byte) {
	h := make([]byte, nbd.OptionHeaderLen)
	if _, err := io.ReadFull(c, h); err != nil {
		return nbd.OptionHeader{}, nil
	}
	oh, _ := nbd.ParseOptionHeader(h)
	d := make([]byte, oh.Length)
	io.ReadFull(c, d)
	return oh, d
}

func TestHandshakeFallbacksAndErrors(t *testing.T) {
	greet := func(c net.Conn, f nbd.HandshakeFlags) {
		c.Write(nbd.AppendGreeting(nil, f))
		io.ReadFull(c, make([]byte, 4))
	}
	for _, tc := range []struct {
		name    string
		script  func(c net.Conn)
		want    ExportInfo
		wantErr string
	}{
		{name: "export name fallback with zeroes", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, oh.Option, nbd.RepErrUnsup, nil))
			oh, d := readOpt(c)
			if oh.Option != nbd.OptExportName || string(d) != "e" {
				return
			}
			c.Write(nbd.AppendExportNameReply(nil, 1<<30, nbd.FlagHasFlags|nbd.FlagReadOnly, false))
		}, want: ExportInfo{Size: 1 << 30, Flags: nbd.FlagHasFlags | nbd.FlagReadOnly}},
		{name: "export name fallback no zeroes", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle|nbd.FlagNoZeroes)
			oh, _ := readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, oh.Option, nbd.RepErrUnsup, nil))
			readOpt(c)
			c.Write(nbd.AppendExportNameReply(nil, 512, nbd.FlagHasFlags, true))
		}, want: ExportInfo{Size: 512, Flags: nbd.FlagHasFlags}},
		{name: "not fixed newstyle", script: func(c net.Conn) { greet(c, 0) }, wantErr: "fixed newstyle"},
		{name: "oldstyle magic", script: func(c net.Conn) {
			b := binary.BigEndian.AppendUint64(nil, 0x4e42444d41474943)
			c.Write(binary.BigEndian.AppendUint64(b, 0x00420281861253))
			c.Write([]byte{0, 0})
		}, wantErr: "IHAVEOPT"},
		{name: "ack without export info", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, oh.Option, nbd.RepAck, nil))
		}, wantErr: "without NBD_INFO_EXPORT"},
		{name: "reply to other option", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, nbd.OptList, nbd.RepAck, nil))
		}, wantErr: "want one to NBD_OPT_GO"},
		{name: "huge reply", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			oh, _ := readOpt(c)
			h := nbd.AppendOptionReply(nil, oh.Option, nbd.RepInfo, nil)
			binary.BigEndian.PutUint32(h[16:], 1<<30)
			c.Write(h)
		}, wantErr: "at most"},
		{name: "policy error", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, oh.Option, nbd.RepErrPolicy, []byte("wrong address")))
		}, wantErr: "wrong address"},
		{name: "bad info", script: func(c net.Conn) {
			greet(c, nbd.FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(nbd.AppendOptionReply(nil, oh.Option, nbd.RepInfo, []byte{0, 0, 1}))
		}, wantErr: "info reply"},
		{name: "closed mid handshake", script: func(c net.Conn) { greet(c, nbd.FlagFixedNewstyle); readOpt(c) }, wantErr: "read option reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeServer(t, tc.script)
			exportName := "e"
			got, err := Handshake(c, exportName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Handshake = %+v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Handshake = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzHandshake feeds arbitrary server bytes to the client handshake: it
// must return an error or a result, never panic or loop.
func FuzzHandshake(f *testing.F) {
	ok := nbd.AppendGreeting(nil, nbd.FlagFixedNewstyle|nbd.FlagNoZeroes)
	ok = nbd.AppendOptionReply(ok, nbd.OptGo, nbd.RepInfo, nbd.AppendInfo(nil, nbd.Info{Type: nbd.InfoExport, Size: 1 << 20, Flags: nbd.FlagHasFlags}))
	ok = nbd.AppendOptionReply(ok, nbd.OptGo, nbd.RepInfo, nbd.AppendInfo(nil, nbd.Info{Type: nbd.InfoBlockSize, MinBlock: 512, PreferredBlock: 4096, MaxBlock: 1 << 25}))
	ok = nbd.AppendOptionReply(ok, nbd.OptGo, nbd.RepAck, nil)
	f.Add(ok)
	unsup := nbd.AppendGreeting(nil, nbd.FlagFixedNewstyle)
	unsup = nbd.AppendOptionReply(unsup, nbd.OptGo, nbd.RepErrUnsup, nil)
	f.Add(nbd.AppendExportNameReply(unsup, 512, nbd.FlagHasFlags, false))
	f.Fuzz(func(t *testing.T, server []byte) {
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(server), io.Discard}
		Handshake(rw, "export")
	})
}
