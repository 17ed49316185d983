package nbd

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestClientHandshakeServer runs the client's handshake against the
// server, then reads a block the way the kernel will: a simple reply.
func TestClientHandshakeServer(t *testing.T) {
	exp := &memExport{b: make([]byte, 1<<20), minBlock: 1024}
	copy(exp.b[4096:], "hello")
	addr := serve(t, Config{}, &memExports{m: map[string]*memExport{"s3cret": exp}}, &testutil.SyncBuffer{})

	for _, tc := range []struct {
		export  string
		wantErr string
	}{
		{export: "s3cret"},
		{export: "wrong", wantErr: "server refused export"},
	} {
		t.Run(tc.export, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			info, err := ClientHandshake(c, tc.export)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ClientHandshake(%q) = %+v, %v; want error containing %q", tc.export, info, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != 1<<20 || info.Flags&FlagHasFlags == 0 || info.Flags&FlagReadOnly != 0 ||
				info.MinBlock != 1024 || info.PreferredBlock != 4096 {
				t.Fatalf("ClientHandshake = %+v; want size 1 MiB, writable, blocks 1024/4096", info)
			}
			c.Write(AppendRequest(nil, Request{Type: CmdRead, Handle: 7, Offset: 4096, Length: 1024}))
			reply := make([]byte, 16+1024)
			if _, err := io.ReadFull(c, reply); err != nil {
				t.Fatal(err)
			}
			h, e, err := ParseSimpleReply(reply)
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

func readOpt(c net.Conn) (OptionHeader, []byte) {
	h := make([]byte, OptionHeaderLen)
	if _, err := io.ReadFull(c, h); err != nil {
		return OptionHeader{}, nil
	}
	oh, _ := ParseOptionHeader(h)
	d := make([]byte, oh.Length)
	io.ReadFull(c, d)
	return oh, d
}

func TestClientHandshakeFallbacksAndErrors(t *testing.T) {
	greet := func(c net.Conn, f HandshakeFlags) {
		c.Write(AppendGreeting(nil, f))
		io.ReadFull(c, make([]byte, 4))
	}
	for _, tc := range []struct {
		name    string
		script  func(c net.Conn)
		want    Negotiated
		wantErr string
	}{
		{name: "export name fallback with zeroes", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(AppendOptionReply(nil, oh.Option, RepErrUnsup, nil))
			oh, d := readOpt(c)
			if oh.Option != OptExportName || string(d) != "e" {
				return
			}
			c.Write(AppendExportNameReply(nil, 1<<30, FlagHasFlags|FlagReadOnly, false))
		}, want: Negotiated{Size: 1 << 30, Flags: FlagHasFlags | FlagReadOnly}},
		{name: "export name fallback no zeroes", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle|FlagNoZeroes)
			oh, _ := readOpt(c)
			c.Write(AppendOptionReply(nil, oh.Option, RepErrUnsup, nil))
			readOpt(c)
			c.Write(AppendExportNameReply(nil, 512, FlagHasFlags, true))
		}, want: Negotiated{Size: 512, Flags: FlagHasFlags}},
		{name: "not fixed newstyle", script: func(c net.Conn) { greet(c, 0) }, wantErr: "fixed newstyle"},
		{name: "oldstyle magic", script: func(c net.Conn) {
			b := binary.BigEndian.AppendUint64(nil, 0x4e42444d41474943)
			c.Write(binary.BigEndian.AppendUint64(b, 0x00420281861253))
			c.Write([]byte{0, 0})
		}, wantErr: "IHAVEOPT"},
		{name: "ack without export info", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(AppendOptionReply(nil, oh.Option, RepAck, nil))
		}, wantErr: "without NBD_INFO_EXPORT"},
		{name: "reply to other option", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			readOpt(c)
			c.Write(AppendOptionReply(nil, OptList, RepAck, nil))
		}, wantErr: "want one to NBD_OPT_GO"},
		{name: "huge reply", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			oh, _ := readOpt(c)
			h := AppendOptionReply(nil, oh.Option, RepInfo, nil)
			binary.BigEndian.PutUint32(h[16:], 1<<30)
			c.Write(h)
		}, wantErr: "at most"},
		{name: "policy error", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(AppendOptionReply(nil, oh.Option, RepErrPolicy, []byte("wrong address")))
		}, wantErr: "wrong address"},
		{name: "bad info", script: func(c net.Conn) {
			greet(c, FlagFixedNewstyle)
			oh, _ := readOpt(c)
			c.Write(AppendOptionReply(nil, oh.Option, RepInfo, []byte{0, 0, 1}))
		}, wantErr: "info reply"},
		{name: "closed mid handshake", script: func(c net.Conn) { greet(c, FlagFixedNewstyle); readOpt(c) }, wantErr: "read option reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeServer(t, tc.script)
			exportName := "e"
			got, err := ClientHandshake(c, exportName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ClientHandshake = %+v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ClientHandshake = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzClientHandshake feeds arbitrary server bytes to the client handshake: it
// must return an error or a result, never panic or loop.
func FuzzClientHandshake(f *testing.F) {
	ok := AppendGreeting(nil, FlagFixedNewstyle|FlagNoZeroes)
	ok = AppendOptionReply(ok, OptGo, RepInfo, AppendInfo(nil, Info{Type: InfoExport, Size: 1 << 20, Flags: FlagHasFlags}))
	ok = AppendOptionReply(ok, OptGo, RepInfo, AppendInfo(nil, Info{Type: InfoBlockSize, MinBlock: 512, PreferredBlock: 4096, MaxBlock: 1 << 25}))
	ok = AppendOptionReply(ok, OptGo, RepAck, nil)
	f.Add(ok)
	unsup := AppendGreeting(nil, FlagFixedNewstyle)
	unsup = AppendOptionReply(unsup, OptGo, RepErrUnsup, nil)
	f.Add(AppendExportNameReply(unsup, 512, FlagHasFlags, false))
	f.Fuzz(func(t *testing.T, server []byte) {
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(server), io.Discard}
		ClientHandshake(rw, "export")
	})
}
