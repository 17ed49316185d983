package nbd

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestConnectFloodFromOneHost: 2000 connections from one host (127.0.0.2)
// that never say a word after the greeting. The server keeps at most
// MaxHandshakesPerClient of them in the handshake and closes the rest at
// once with a log line, and a machine elsewhere (127.0.0.1) attaches and
// reads its disk within 1.5× its quiet time (plus 200 ms of slack: other
// tests share the CPUs).
func TestConnectFloodFromOneHost(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a few seconds")
	}
	logs := &testutil.SyncBuffer{}
	exports := &memExports{m: map[string]*memExport{"ro": {b: pattern(8 << 20), ro: true}}}
	srv := NewServer(exports, Config{MaxHandshakesPerClient: 16,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	addr := ln.Addr().String()

	readDisk := func() time.Duration {
		start := time.Now()
		c := dial(t, addr, ClientFixedNewstyle|ClientNoZeroes)
		c.open("ro", false)
		for off := 0; off < 8<<20; off += 1 << 20 {
			c.send(Request{Type: CmdRead, Handle: uint64(off), Offset: uint64(off), Length: 1 << 20}, nil)
			if _, e, data := c.reply(1 << 20); e != 0 || len(data) != 1<<20 {
				t.Fatalf("READ at %d: errno %d, %d bytes", off, e, len(data))
			}
		}
		c.send(Request{Type: CmdDisc}, nil)
		c.c.Close()
		return time.Since(start)
	}
	median := func() time.Duration {
		ds := []time.Duration{readDisk(), readDisk(), readDisk()}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[1]
	}
	quiet := median()
	goroutines := runtime.NumGoroutine()

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	peak := 0
	for i := 0; i < 2000; i++ {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		flood = append(flood, c)
		if i%100 == 99 {
			_, n := srv.admit.Count("127.0.0.2")
			peak = max(peak, n)
		}
	}
	during := median()
	_, n := srv.admit.Count("127.0.0.2")
	peak = max(peak, n)
	extra := runtime.NumGoroutine() - goroutines
	t.Logf("quiet %v, during the flood %v; the flooding host peaked at %d handshakes; %d goroutines more",
		quiet, during, peak, extra)
	if peak == 0 || peak > 16 {
		t.Errorf("the flooding host held up to %d connections in the handshake, want 1..16", peak)
	}
	if extra > 100 {
		t.Errorf("%d goroutines more during the flood: the server is not bounding it", extra)
	}
	if limit := quiet*3/2 + 200*time.Millisecond; during > limit {
		t.Errorf("reading the disk took %v during the flood, want at most %v (1.5× its quiet %v + 200 ms)", during, limit, quiet)
	}
	if !strings.Contains(logs.String(), "nbd connections closed unserved") {
		t.Errorf("no log line says flood connections were closed")
	}
	// A connection past the cap is closed at once: it reads EOF, not a greeting.
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if k, err := c.Read(make([]byte, 1)); k != 0 || err == nil {
		t.Errorf("a connection past the cap read %d bytes, %v; want it closed", k, err)
	}
}
