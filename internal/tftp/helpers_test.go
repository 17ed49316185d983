package tftp

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// mapFS serves in-memory files and counts opens.
type mapFS struct {
	mu    sync.Mutex
	files map[string][]byte
	mtime map[string]time.Time
	opens map[string]int
	reads int // ReadAt calls on files it returned
}

func newMapFS() *mapFS {
	return &mapFS{files: map[string][]byte{}, mtime: map[string]time.Time{}, opens: map[string]int{}}
}

func (m *mapFS) put(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name] = data
	m.mtime[name] = time.Unix(1700000000, int64(len(m.mtime)))
}

func (m *mapFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opens[name]++
	d, ok := m.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return &countingFile{memFile: memFile{data: d}, m: m, mtime: m.mtime[name]}, nil
}

type countingFile struct {
	memFile
	m     *mapFS
	mtime time.Time
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	f.m.reads++
	f.m.mu.Unlock()
	return f.memFile.ReadAt(p, off)
}

func (f *countingFile) ModTime() time.Time { return f.mtime }

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// statsRecorder collects OnTransfer reports.
type statsRecorder struct {
	mu  sync.Mutex
	all []TransferStats
	ch  chan TransferStats
}

func newStatsRecorder() *statsRecorder { return &statsRecorder{ch: make(chan TransferStats, 1024)} }

func (r *statsRecorder) hook(st TransferStats) {
	r.mu.Lock()
	r.all = append(r.all, st)
	r.mu.Unlock()
	select {
	case r.ch <- st:
	default:
	}
}

// next waits for the next report.
func (r *statsRecorder) next(t testing.TB) TransferStats {
	t.Helper()
	select {
	case st := <-r.ch:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no OnTransfer report within 10s")
	}
	return TransferStats{}
}

// syncBuffer is shared with the other packages' tests.
type syncBuffer = testutil.SyncBuffer

// startServer serves cfg on an ephemeral loopback port until the test ends.
// Unless cfg sets them, it adds a stats recorder and a debug log buffer.
func startServer(t testing.TB, cfg Config, setup ...func(*Server)) (net.Addr, *statsRecorder, *syncBuffer) {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := newStatsRecorder()
	if cfg.OnTransfer == nil {
		cfg.OnTransfer = rec.hook
	}
	logs := &syncBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := NewServer(cfg)
	for _, f := range setup {
		f(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of cancel")
		}
	})
	return conn.LocalAddr(), rec, logs
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func asClientError(err error, ce *clientError) bool { return errors.As(err, ce) }

func isGiveUp(err error) bool { return errors.Is(err, errGiveUp) }

func parseIP(t testing.TB, s string) net.IP {
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad IP %q", s)
	}
	return ip
}

// setClientWait shortens minClientWait for a test and returns the restore.
func setClientWait(d time.Duration) func() {
	old := minClientWait
	minClientWait = d
	return func() { minClientWait = old }
}

// checkShutdown serves cfg, starts a client that drops the DATA blocks drop
// says, and once ready reports true (nil: after 200 ms) cancels the server:
// Serve must return nil within a second and the transfer report the
// cancellation.
func checkShutdown(t *testing.T, cfg Config, drop func(idx uint64, seen int) bool, ready func() bool) {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := newStatsRecorder()
	cfg.OnTransfer = rec.hook
	s := NewServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, conn) }()
	c := newTestClient(conn.LocalAddr())
	c.timeout = 30 * time.Second
	c.drop = drop
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	go c.get(cctx, "f")
	if ready == nil {
		time.Sleep(200 * time.Millisecond)
	} else {
		waitFor(t, ready)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil on cancel", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve still running 3s after cancel")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if st := rec.next(t); !errors.Is(st.Err, context.Canceled) {
		t.Fatalf("transfer report %+v, want a shutdown error", st)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5 s")
}
