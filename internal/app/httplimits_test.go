package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestHTTPUnderSlowloris: 1000 connections from one host (127.0.0.2) that
// send a header byte now and then and never finish. The server keeps at
// most httpMaxConnsPerClient of them, closes the rest at once with a log
// line, and a machine elsewhere (127.0.0.1) still gets its file at once. A
// header block past httpMaxHeaderBytes gets 431.
func TestHTTPUnderSlowloris(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 1000 connections for a few seconds")
	}
	payload := bytes.Repeat([]byte("k"), 4<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(payload) }), log)
	}()
	defer func() {
		cancel()
		<-done
	}()
	url := "http://" + ln.Addr().String() + "/vmlinuz"
	get := func() time.Duration {
		start := time.Now()
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
		if err != nil {
			t.Fatalf("legitimate GET: %v", err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(payload)) {
			t.Fatalf("legitimate GET: %d bytes, want %d", n, len(payload))
		}
		return time.Since(start)
	}
	quiet := get()
	goroutines := runtime.NumGoroutine()
	var extra int

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n") // and never the blank line
		slow = append(slow, c)
	}
	during := get()
	extra = runtime.NumGoroutine() - goroutines
	// Every slow connection reads at once, each for up to a second: the
	// server's close shows as EOF or a reset (it closed with our bytes
	// unread), a held connection as a timeout.
	eofs := make(chan bool, len(slow))
	for _, c := range slow {
		go func() {
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			eofs <- err != nil && !(errors.As(err, &ne) && ne.Timeout())
		}()
	}
	closed := 0
	for range slow {
		if <-eofs {
			closed++
		}
	}
	t.Logf("quiet %v, under 1000 slow connections %v; %d closed by the server; %d goroutines more", quiet, during, closed, extra)
	if held := len(slow) - closed; held > httpMaxConnsPerClient {
		t.Errorf("the slow host holds %d connections, want at most %d", held, httpMaxConnsPerClient)
	}
	if extra > 2*httpMaxConnsPerClient+50 {
		t.Errorf("%d goroutines more: the server is not bounding the slow host", extra)
	}
	if limit := quiet*3/2 + 200*time.Millisecond; during > limit {
		t.Errorf("a legitimate GET took %v under the flood, want at most %v (1.5× its quiet %v + 200 ms)", during, limit, quiet)
	}
	if !strings.Contains(logs.String(), "http connections closed unserved") {
		t.Error("no log line says connections were closed")
	}

	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Huge", strings.Repeat("a", 2*httpMaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a %d-byte header got %s, want 431", 2*httpMaxHeaderBytes, resp.Status)
	}
}
