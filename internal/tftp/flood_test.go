package tftp

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestRRQFloodFromOneHost: 500 ports of one host (127.0.0.2) send RRQs and
// never ACK. The server runs at most MaxPerClient transfers for that host,
// drops the rest with a log line, and a machine elsewhere (127.0.0.1)
// is not starved: its downloads take at most 3× (plus 500 ms) what the
// same downloads take meanwhile from a twin server nobody floods. The
// two are sampled in turn, so load from outside the test slows both.
func TestRRQFloodFromOneHost(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a few seconds")
	}
	fs := newMapFS()
	big := randBytes(7, 16<<20)
	fs.put("big.img", big)
	fs.put("nbp.efi", randBytes(8, 1<<20))
	var srv *Server
	addr, _, logs := startServer(t, Config{FS: fs, MaxPerClient: 8}, func(s *Server) { srv = s })
	twin, _, _ := startServer(t, Config{FS: fs, MaxPerClient: 8})

	download := func(from net.Addr) time.Duration {
		t.Helper()
		ctx := testCtx(t, 30*time.Second)
		start := time.Now()
		got, err := fetch(ctx, from, "big.img", ClientOptions{BlockSize: 1456, WindowSize: 16})
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("legitimate download from %v: %v (%d bytes, want %d)", from, err, len(got), len(big))
		}
		return time.Since(start)
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	download(addr) // warms both servers' file cache and the test's buffers
	goroutines := runtime.NumGoroutine()

	flooders := make([]*net.UDPConn, 500)
	for i := range flooders {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
		if err != nil {
			t.Fatalf("flood socket %d: %v", i, err)
		}
		defer c.Close()
		flooders[i] = c
	}
	rrq := (&Request{Op: OpRRQ, Filename: "nbp.efi", Mode: "octet"}).Append(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // every port repeats its RRQ every 50 ms until the test stops
		defer wg.Done()
		for round := 0; round < 400; round++ {
			for _, c := range flooders {
				c.WriteToUDP(rrq, addr.(*net.UDPAddr))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	peak, peakTotal := 0, 0
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			total, host := srv.admit.Count("127.0.0.2")
			peak, peakTotal = max(peak, host), max(peakTotal, total)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	// Full swing: the flooding host holds all its transfers, and requests
	// beyond them are dropped.
	testutil.Eventually(t, 10*time.Second, "the flood in full swing", func() error {
		_, host := srv.admit.Count("127.0.0.2")
		if dropped := strings.Contains(logs.String(), "requests dropped, too many transfers"); host < 8 || !dropped {
			return fmt.Errorf("the flooding host has %d transfers (want 8); drops logged: %v", host, dropped)
		}
		return nil
	})
	var quiets, durings []time.Duration
	for range 3 {
		quiets = append(quiets, download(twin))
		durings = append(durings, download(addr))
	}
	quiet, during := median(quiets), median(durings)
	extra := runtime.NumGoroutine() - goroutines
	close(stop)
	wg.Wait()
	<-sampled

	t.Logf("unflooded twin %v, flooded server %v; flooding host peaked at %d transfers (%d in all), %d goroutines more",
		quiet, during, peak, peakTotal, extra)
	if peak > 8 || peak == 0 {
		t.Errorf("the flooding host had up to %d transfers at once, want 1..8 (MaxPerClient)", peak)
	}
	if extra > 100 {
		t.Errorf("%d goroutines more during the flood: the server is not bounding it", extra)
	}
	// The bound is for starvation, not speed: the flood's 10,000 refused
	// RRQs a second cost the CPU both servers share.
	if limit := quiet*3 + 500*time.Millisecond; during > limit {
		t.Errorf("a legitimate download took %v from the flooded server, want at most %v (3× the unflooded twin's %v + 500 ms)", during, limit, quiet)
	}
	if !strings.Contains(logs.String(), "requests dropped, too many transfers") {
		t.Errorf("no log line says requests were dropped")
	}
}

// TestMaxTransfers: beyond MaxTransfers in all, a request is dropped even
// from a host with none running, and admitted again once one ends.
func TestMaxTransfers(t *testing.T) {
	fs := newMapFS()
	fs.put("f", randBytes(9, 4096))
	var srv *Server
	addr, rec, _ := startServer(t, Config{FS: fs, MaxTransfers: 1, MaxPerClient: 1}, func(s *Server) { srv = s })
	// One transfer that never ACKs holds the only slot.
	hog, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 3)})
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	hog.WriteToUDP((&Request{Op: OpRRQ, Filename: "f", Mode: "octet"}).Append(nil), addr.(*net.UDPAddr))
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		n := len(srv.active)
		srv.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first transfer never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := newTestClient(addr)
	c.timeout = 200 * time.Millisecond
	if _, err := c.get(testCtx(t, 2*time.Second), "f"); err == nil {
		t.Fatal("a second transfer ran beside the first with MaxTransfers 1")
	}
	hog.Close() // the server gives the hog up after its retries
	if st := rec.next(t); st.Err == nil {
		t.Fatalf("the hog's transfer ended without an error: %+v", st)
	}
	got, err := fetch(testCtx(t, 10*time.Second), addr, "f", ClientOptions{})
	if err != nil || len(got) != 4096 {
		t.Fatalf("after the slot freed: %v, %d bytes", err, len(got))
	}
}
