package blockstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// streamRange is what a test sees of a stream: the range its loads asked
// for.
type streamRange struct{ start, asked int64 }

func streamRanges(t *testing.T, ss *streams) []streamRange {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var rs []streamRange
	for _, s := range ss.all {
		if s.done < s.asked && !s.failed {
			t.Errorf("stream at %d: loads asked for up to %d and it stopped at %d", s.start, s.asked, s.done)
		}
		rs = append(rs, streamRange{s.start, s.asked})
	}
	return rs
}

// allResident says whether every page of [off, off+n) of f is in the page
// cache.
func allResident(t *testing.T, f *os.File, off, n int64) bool {
	t.Helper()
	page := int64(os.Getpagesize())
	for pg := off &^ (page - 1); pg < off+n; pg += page {
		if !resident(t, f, pg, page) {
			return false
		}
	}
	return true
}

// coldImage is a file image of data whose pages are out of the page cache,
// with streams that stay fresh for the whole test (a stalled test machine
// must not make a stopped stream stale between two loads).
func coldImage(t *testing.T, data []byte) *Image {
	t.Helper()
	img := fileImage(t, t.TempDir(), data)
	if err := img.f.Sync(); err != nil {
		t.Fatal(err)
	}
	dropPages(t, img.f, 0, int64(len(data)))
	img.streams.fresh = time.Hour
	return img
}

// TestStreamsJoin checks which loads join a stream and which start one:
// continuing loads share one reader, scattered ones get their own, and a
// load returns only once its range is in the page cache.
func TestStreamsJoin(t *testing.T) {
	const k = 256 << 10
	type load struct{ off, n int64 }
	front := make([]load, 24)
	for i := range front {
		front[i] = load{int64(i) * k, k}
	}
	for _, tc := range []struct {
		name  string
		loads []load
		want  []streamRange
	}{
		{"front to back", front, []streamRange{{0, 24 * k}}},
		{"a gap within the slack", []load{{0, k}, {k + streamSlack, k}}, []streamRange{{0, 2*k + streamSlack}}},
		{"a gap past the slack", []load{{0, k}, {k + streamSlack + 4096, k}}, []streamRange{{0, k}, {k + streamSlack + 4096, 2*k + streamSlack + 4096}}},
		{"behind a stream's start", []load{{4 * k, k}, {0, k}}, []streamRange{{4 * k, 5 * k}, {0, k}}},
		{"a little behind", []load{{0, 4 * k}, {k, k}, {4 * k, k}}, []streamRange{{0, 5 * k}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := coldImage(t, randomBase(8<<20, 50).b)
			for _, l := range tc.loads {
				if !img.streams.load(l.off, l.n) || !allResident(t, img.f, l.off, l.n) {
					t.Fatalf("load(%d, %d) failed, or returned before its pages were in the page cache", l.off, l.n)
				}
			}
			got := streamRanges(t, img.streams)
			if len(got) != len(tc.want) {
				t.Fatalf("streams %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("streams %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestStreamContinues is the joining rule on its own.
func TestStreamContinues(t *testing.T) {
	const start, asked = 100 << 20, 200 << 20
	now := time.Now()
	for _, tc := range []struct {
		name    string
		running bool
		idle    time.Duration // how long ago it stopped, when not running
		failed  bool
		off     int64
		want    bool
	}{
		{"running, where its loads have got to", true, 0, false, asked, true},
		{"running, just past", true, 0, false, asked + streamSlack, true},
		{"running, too far past", true, 0, false, asked + streamSlack + 1, false},
		{"running, a little behind", true, 0, false, asked - streamBehind, true},
		{"running, far behind", true, 0, false, asked - streamBehind - 1, false},
		{"running, before its start", true, 0, false, start - 1, false},
		{"just stopped, continuing", false, streamFresh / 2, false, asked, true},
		{"just stopped, a little behind", false, streamFresh / 2, false, asked - 4096, true},
		{"stopped long ago, continuing", false, 2 * streamFresh, false, asked, false},
		{"failed", false, 0, true, asked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stream{start: start, done: asked + maxLead, asked: asked, running: tc.running, failed: tc.failed, idle: now.Add(-tc.idle)}
			if got := s.takes(tc.off, now.Add(-streamFresh)); got != tc.want {
				t.Fatalf("takes(%d) = %v, want %v", tc.off, got, tc.want)
			}
		})
	}
}

// TestStreamLead: a stream reads ahead of its loads once they have shown
// it sequential, as far as they have read, up to maxLead and the end of
// the image.
func TestStreamLead(t *testing.T) {
	const k = 256 << 10
	img := coldImage(t, randomBase(24<<20, 54).b)
	ss := img.streams
	for _, step := range []struct {
		off, n    int64
		wantAhead int64 // of the end of this load
	}{
		{0, k, 0},
		{k, k, 0},
		{2 * k, k, 0},
		{3 * k, k, minLead},
		{4 * k, k, 5 * k},
		{5 * k, k, 6 * k},
		{6 * k, 8 << 20, maxLead},
		{6*k + 8<<20, 4 << 20, maxLead},
		{6*k + 12<<20, 4 << 20, 24<<20 - (6*k + 16<<20)},
	} {
		if !ss.load(step.off, step.n) {
			t.Fatalf("load at %d failed", step.off)
		}
		ss.mu.Lock()
		s := ss.all[0]
		for s.running {
			s.moved.Wait()
		}
		ahead := s.done - (step.off + step.n)
		ss.mu.Unlock()
		if len(ss.all) != 1 || ahead != step.wantAhead {
			t.Fatalf("after the load at %d: %d streams, read %d ahead, want 1 stream, %d ahead", step.off, len(ss.all), ahead, step.wantAhead)
		}
	}
}

// TestStreamsConcurrentReaders has several clients read the whole image at
// once, each with loads in flight as the nbd server's workers make them:
// every load returns with its range in the page cache, however the loads
// interleave and whichever stream they join.
func TestStreamsConcurrentReaders(t *testing.T) {
	const size, k, inFlight, readers = 6 << 20, 128 << 10, 6, 5
	img := coldImage(t, randomBase(size, 51).b)
	var wg sync.WaitGroup
	errs := make(chan string, readers*size/k)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots := make(chan struct{}, inFlight)
			var mine sync.WaitGroup
			for off := int64(0); off < size; off += k {
				slots <- struct{}{}
				mine.Add(1)
				go func() {
					defer func() { <-slots; mine.Done() }()
					if !img.streams.load(off, k) || !allResident(t, img.f, off, k) {
						errs <- fmt.Sprintf("load at %d", off)
					}
				}()
			}
			mine.Wait()
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a load failed or returned before its pages were in the page cache (%s)", e)
	}
}

// TestStreamsFailure: a load the file cannot give fails its stream and its
// waiter hears it; later loads elsewhere, and again there, start afresh.
func TestStreamsFailure(t *testing.T) {
	const size = 1 << 20
	data := randomBase(size, 52).b
	img := fileImage(t, t.TempDir(), data)
	ss := img.streams
	for i := range 2 {
		if ss.load(size-4096, 8192) {
			t.Fatalf("try %d: a load past the end of the file said it was loaded", i)
		}
	}
	if !ss.load(0, 4096) {
		t.Fatal("a load inside the file failed after another failed")
	}
	failed := 0
	ss.mu.Lock()
	for _, s := range ss.all {
		if s.failed {
			failed++
		}
	}
	ss.mu.Unlock()
	if failed != 2 {
		t.Fatalf("%d failed streams, want 2 (a failed stream is never joined)", failed)
	}
}

// TestStreamsLimit: scattered loads past maxStreams reuse the least
// recently used idle stream, and with every stream busy a load reads its
// range itself.
func TestStreamsLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse.img")
	const gap = 2*streamSlack + 4096
	size := int64(maxStreams+8) * gap
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	img, err := OpenImage(p)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	zeros := make([]byte, 4096)
	for i := int64(0); i < maxStreams+8; i++ {
		if b, ok := img.loadSpan(i*gap, 4096); !ok || !bytes.Equal(b, zeros) {
			t.Fatalf("load %d: ok = %v, or other bytes", i, ok)
		}
	}
	rs := streamRanges(t, img.streams)
	if len(rs) != maxStreams {
		t.Fatalf("%d streams, want %d", len(rs), maxStreams)
	}
	for _, r := range rs {
		if r.start < 8*gap {
			t.Fatalf("stream at %d kept; the 8 least recently used should have gone", r.start)
		}
	}
	ss := img.streams
	ss.mu.Lock()
	for _, s := range ss.all {
		s.running = true
	}
	ss.mu.Unlock()
	const busyLoad = 2*gap + 4096*3
	if b, ok := img.loadSpan(busyLoad, 4096); !ok || !bytes.Equal(b, zeros) {
		t.Fatal("a load with every stream busy failed")
	}
	got := streamRanges(t, ss)
	if len(got) != maxStreams {
		t.Fatalf("%d streams after a load with all busy, want %d", len(got), maxStreams)
	}
	for _, r := range got {
		if r.start == busyLoad {
			t.Fatal("a load with every stream busy took a busy stream's slot")
		}
	}
	ss.mu.Lock()
	for _, s := range ss.all {
		s.running = false
	}
	ss.mu.Unlock()
}

// TestStreamsClose: closing the image closes every stream's descriptor, and
// starts no stream afterwards.
func TestStreamsClose(t *testing.T) {
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	p := filepath.Join(t.TempDir(), "base.img")
	data := randomBase(16<<20, 53).b
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devNull(); err != nil { // opened once per process, maybe not yet
		t.Fatal(err)
	}
	before := fds()
	img, err := OpenImage(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		off := i * (4 << 20)
		if b, ok := img.loadSpan(off, 4096); !ok || !bytes.Equal(b, data[off:off+4096]) {
			t.Fatalf("load at %d failed", off)
		}
	}
	if n := len(streamRanges(t, img.streams)); n != 3 {
		t.Fatalf("%d streams, want 3", n)
	}
	if fds() != before+1+3 {
		t.Fatalf("%d descriptors open, want %d: the image's and one per stream", fds(), before+4)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	if fds() != before {
		t.Fatalf("%d descriptors open after Close, want %d", fds(), before)
	}
	if img.streams.load(0, 4096) {
		t.Fatal("a load after Close, on the closed image, said it was loaded")
	}
	if n := len(streamRanges(t, img.streams)); n != 0 {
		t.Fatalf("a load after Close started a stream (%d streams)", n)
	}
}
