package nbd

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestRevokeEndsSession: closing an export's Revoked channel ends a live
// session promptly, over TCP, with ErrRevoked in its statistics; requests
// before it are answered.
func TestRevokeEndsSession(t *testing.T) {
	x := &memExport{b: pattern(64 << 10), revoked: make(chan struct{})}
	stats := make(chan SessionStats, 1)
	c := dial(t, serveExport(t, Config{Hook: hookFunc(func(s SessionStats) { stats <- s })}, x), ClientFixedNewstyle|ClientNoZeroes)
	c.open("any", false)
	c.send(Request{Type: CmdRead, Handle: 1, Offset: 4096, Length: 512}, nil)
	if h, e, data := c.reply(512); h != 1 || e != 0 || !bytes.Equal(data, x.b[4096:4608]) {
		t.Fatalf("read before revoke: handle %d errno %v", h, e)
	}
	close(x.revoked)
	c.expectClosed()
	select {
	case s := <-stats:
		if !errors.Is(s.Err, ErrRevoked) {
			t.Fatalf("session ended with %v, want ErrRevoked", s.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no session statistics after revoke")
	}
}
