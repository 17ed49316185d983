package admission

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestLimitListener: with room for one connection, a second is closed
// unread while the first is open, and a third is admitted once the first
// is closed.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := New(1, 1, nil, "connections closed unserved")
	ln := LimitListener(inner, lim)
	defer ln.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no connection accepted within 10 s")
		}
		return nil
	}

	dial()
	first := next()
	if total, host := lim.Count("127.0.0.1"); total != 1 || host != 1 {
		t.Fatalf("Count = %d, %d with one connection open; want 1, 1", total, host)
	}
	refused := dial()
	var ne net.Error
	if _, err := refused.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read on the connection past the bound: %v, want EOF or a reset from the server's close", err)
	}
	if n := lim.Refused(); n != 1 {
		t.Fatalf("Refused = %d, want 1", n)
	}
	first.Close()
	dial()
	third := next()
	defer third.Close()
	if total, _ := lim.Count("127.0.0.1"); total != 1 {
		t.Fatalf("Count = %d after the first closed and the third came; want 1", total)
	}
}

// readFromConn is a connection that can read from a source itself, as a
// *net.TCPConn does with sendfile.
type readFromConn struct {
	net.Conn
	got bytes.Buffer
	via string
}

func (c *readFromConn) ReadFrom(r io.Reader) (int64, error) {
	c.via = "ReadFrom"
	return c.got.ReadFrom(r)
}

func (c *readFromConn) Write(b []byte) (int, error) {
	c.via = "Write"
	return c.got.Write(b)
}

// TestLimitedConnKeepsReadFrom: a body written to an admitted connection
// through io.Copy reaches the inner connection's ReadFrom (sendfile for a
// TCP connection), not a copy through Write.
func TestLimitedConnKeepsReadFrom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		inner net.Conn
		via   string
	}{
		{"inner has ReadFrom", &readFromConn{}, "ReadFrom"},
		{"inner has only Write", writeOnly{&readFromConn{}}, "Write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &limitedConn{Conn: tc.inner, release: func() {}}
			body := bytes.Repeat([]byte("kernel"), 1000)
			// net/http hands the connection a file, which has no WriteTo.
			if n, err := io.Copy(c, struct{ io.Reader }{bytes.NewReader(body)}); err != nil || n != int64(len(body)) {
				t.Fatalf("io.Copy = %d, %v; want %d, nil", n, err, len(body))
			}
			in := innerOf(tc.inner)
			if in.via != tc.via || !bytes.Equal(in.got.Bytes(), body) {
				t.Fatalf("body reached the inner connection via %s (%d bytes), want via %s, whole", in.via, in.got.Len(), tc.via)
			}
		})
	}
}

// writeOnly hides its connection's ReadFrom.
type writeOnly struct{ c *readFromConn }

func (w writeOnly) Read(b []byte) (int, error)       { return 0, io.EOF }
func (w writeOnly) Write(b []byte) (int, error)      { return w.c.Write(b) }
func (w writeOnly) Close() error                     { return nil }
func (w writeOnly) LocalAddr() net.Addr              { return nil }
func (w writeOnly) RemoteAddr() net.Addr             { return nil }
func (w writeOnly) SetDeadline(time.Time) error      { return nil }
func (w writeOnly) SetReadDeadline(time.Time) error  { return nil }
func (w writeOnly) SetWriteDeadline(time.Time) error { return nil }

func innerOf(c net.Conn) *readFromConn {
	if w, ok := c.(writeOnly); ok {
		return w.c
	}
	return c.(*readFromConn)
}
