package tftp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkConcurrent2000 runs 2000 transfers at once, each checked by
// sha256, and checks the heap stays within a per-transfer bound while they
// run. It takes about 3s on an idle 2-core machine, but far longer when
// other work competes for the CPU, so it is a benchmark (run it with
// -bench Concurrent2000 -benchtime 1x) rather than part of go test;
// TestConcurrent covers 500 transfers.
func BenchmarkConcurrent2000(b *testing.B) {
	for range b.N {
		runConcurrent(b, 2000)
	}
}

func runConcurrent(t testing.TB, nClients int) {
	const nFiles = 10
	fsys := newMapFS()
	sums := map[string][32]byte{}
	for i := range nFiles {
		d := randBytes(uint64(200+i), 30_000+i*7000)
		name := fmt.Sprintf("g%d", i)
		fsys.put(name, d)
		sums[name] = sha256.Sum256(d)
	}
	// Every client is 127.0.0.1 here, standing for nClients machines.
	addr, _, _ := startServer(t, Config{FS: NewCache(fsys, 4<<20), Logger: slog.New(slog.DiscardHandler), OnTransfer: func(TransferStats) {},
		MaxPerClient: 1024, MaxTransfers: 65535})

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, nClients)
	ctx := testCtx(t, 60*time.Second)
	for i := range nClients {
		wg.Go(func() {
			name := fmt.Sprintf("g%d", i%nFiles)
			o := []ClientOptions{{BlockSize: 1456, WindowSize: 16}, {WindowSize: 4}, {}, {BlockSize: 1456, WindowSize: 64}}[i%4]
			o.Timeout = 2 * time.Second
			h := sha256.New()
			_, err := Get(ctx, loopback, addrPort(addr), name, h, o)
			switch {
			case err != nil:
				errs <- fmt.Errorf("client %d (%s %+v): %w", i, name, o, err)
			case [32]byte(h.Sum(nil)) != sums[name]:
				errs <- fmt.Errorf("client %d (%s): sha256 mismatch", i, name)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The heap holds both ends here (each client has a 64 KiB receive
	// buffer); 256 KiB per transfer is far above what either needs and far
	// below what an unbounded window buffer would take.
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("%d transfers in %v; peak heap growth %d KiB (%d bytes per transfer, both ends)",
		nClients, time.Since(start).Round(time.Millisecond), grew>>10, grew/int64(nClients))
	if b, ok := t.(*testing.B); ok {
		b.ReportMetric(float64(grew/int64(nClients)), "heap-B/transfer")
	}
	if grew > int64(nClients)*256<<10 {
		t.Errorf("heap grew by %d MiB for %d transfers, want under 256 KiB each", grew>>20, nClients)
	}
}

// TestFairness runs 8 identical transfers at once and checks that none is
// starved: at a snapshot taken while all run, the slowest has at least a
// quarter of the progress of the fastest. (Equal shares are the design
// goal; the bound only catches gross unfairness, so the test is not flaky
// on a loaded machine.)
func TestFairness(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a few hundred MB")
	}
	const clients, size = 8, 256 << 20
	fsys := newMapFS()
	fsys.put("big", make([]byte, size)) // content is not checked here
	addr, _, _ := startServer(t, Config{FS: NewCache(fsys, 1<<30), Logger: slog.New(slog.DiscardHandler), OnTransfer: func(TransferStats) {}})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	progress := make([]atomic.Int64, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			Get(ctx, loopback, addrPort(addr), "big", progressWriter{&progress[i]}, ClientOptions{BlockSize: 1456, WindowSize: 16})
		})
	}
	// Wait until every client has data, then measure over a fixed span.
	deadline := time.Now().Add(10 * time.Second)
	snap := func() []int64 {
		out := make([]int64, clients)
		for i := range progress {
			out[i] = progress[i].Load()
		}
		return out
	}
	for {
		s := snap()
		if slices.Min(s) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := snap()
	time.Sleep(300 * time.Millisecond)
	after := snap()
	got := make([]int64, clients)
	for i := range got {
		got[i] = after[i] - before[i]
	}
	t.Logf("bytes per client in 300ms: %v", got)
	if lo, hi := slices.Min(got), slices.Max(got); lo*4 < hi || slices.Contains(after, size) {
		t.Errorf("unfair shares over 300ms: slowest %d bytes, fastest %d (want within 4x, all still running)", lo, hi)
	}
	cancel()
	wg.Wait()
}

// progressWriter counts the bytes written to it.
type progressWriter struct{ n *atomic.Int64 }

func (w progressWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}
