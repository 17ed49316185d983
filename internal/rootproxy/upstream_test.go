package rootproxy

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// TestUpstreamFailsOverWithoutAnError: the server dies while readers and
// writers keep requests in flight; every request completes on the next
// server with the right bytes, none with an error.
func TestUpstreamFailsOverWithoutAnError(t *testing.T) {
	const size = 4 << 20
	a := newMemExport(size, 9)
	b := &memExport{data: a.snapshot()} // the same content on a second server
	sa, sb := serveUpstream(t, a), serveUpstream(t, b)
	var moved []string
	var mu sync.Mutex
	up, err := NewUpstream(context.Background(), UpstreamConfig{Dial: dialer(sa.addr, sb.addr), Timeout: time.Second, GiveUp: 10 * time.Second,
		OnFailover: func(from, to string, _ time.Duration) { mu.Lock(); moved = append(moved, from+">"+to); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	want := a.snapshot()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for i := range 200 {
				off := int64((g*200+i)*4096) % (size - int64(len(buf)))
				if err := up.Do(nbd.Request{Type: nbd.CmdRead, Offset: uint64(off), Length: uint32(len(buf))}, nil, buf); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf, want[off:off+int64(len(buf))]) {
					errs <- errors.New("read returned other bytes than the export's")
					return
				}
				if i == 50 && g == 0 {
					sa.kill()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(moved) != 1 || moved[0] != sa.addr+">"+sb.addr {
		t.Fatalf("failovers %v, want one from %s to %s", moved, sa.addr, sb.addr)
	}
}

// TestUpstreamGivesUpWithEIO: with every server gone, a request fails
// with EIO once it has waited GiveUp, and not before.
func TestUpstreamGivesUpWithEIO(t *testing.T) {
	e := newMemExport(1<<20, 4)
	s := serveUpstream(t, e)
	up, err := NewUpstream(context.Background(), UpstreamConfig{Dial: dialer(s.addr), Timeout: 200 * time.Millisecond, GiveUp: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	s.kill()
	start := time.Now()
	err = up.Do(nbd.Request{Type: nbd.CmdRead, Length: 4096}, nil, make([]byte, 4096))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("got %v, want EIO", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("failed after %v, before GiveUp", d)
	}
}

// TestUpstreamPassesServerErrors: an errno from the server reaches the
// caller as the same syscall error, so the kernel gets it unchanged.
func TestUpstreamPassesServerErrors(t *testing.T) {
	e := newMemExport(1<<20, 5)
	e.readOnly = true
	s := serveUpstream(t, e)
	up, err := NewUpstream(context.Background(), UpstreamConfig{Dial: dialer(s.addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	err = up.Do(nbd.Request{Type: nbd.CmdWrite, Length: 512}, make([]byte, 512), nil)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("write to a read-only export: got %v, want EPERM", err)
	}
}
