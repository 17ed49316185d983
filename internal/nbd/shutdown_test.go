package nbd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestShutdownWithUnreadReplies: a client that stops reading replies holds
// shutdown for ShutdownGrace, not until the dead-peer timeout.
func TestShutdownWithUnreadReplies(t *testing.T) {
	const n = 1 << 20
	x := &memExport{b: pattern(4 << 20)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &testutil.SyncBuffer{}
	cfg := Config{MaxBufferBytes: MaxPayload, ShutdownGrace: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	go func() { done <- NewServer(oneExport{x}, cfg).Serve(ctx, ln) }()
	c := dial(t, ln.Addr().String(), ClientFixedNewstyle|ClientNoZeroes)
	if err := c.c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	c.open("disk", false)
	var batch []byte
	for h := range uint64(200) { // 200 MiB of replies: far more than budget and socket buffers hold
		batch = AppendRequest(batch, Request{Type: CmdRead, Handle: h, Offset: h % 4 * n, Length: n})
	}
	c.write(batch)
	testutil.Eventually(t, 5*time.Second, "the server at its buffer bound, stalled on the socket", func() error {
		if !strings.Contains(logs.String(), "nbd requests held back") {
			return errors.New("no request held back yet")
		}
		return nil
	})
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		t.Logf("Serve returned %v after cancel", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still waits 5 s after cancel for a client that reads no replies")
	}
}
