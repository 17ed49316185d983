package admission

import (
	"errors"
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
