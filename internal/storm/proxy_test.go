package storm

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// fakeExport answers reads below failAt and records what it was asked.
type fakeExport struct {
	size   int64
	failAt int64 // reads at or past this offset fail; 0: none
	now    bool  // answer from ReadNow

	mu   sync.Mutex
	seen map[int64]int
}

func (f *fakeExport) Info() nbd.ExportInfo { return nbd.ExportInfo{Size: f.size} }

func (f *fakeExport) ReadNow(b []byte, off int64, _ bool) (nbd.Span, bool) {
	if !f.now {
		return nbd.Span{}, false
	}
	f.note(off)
	return nbd.Span{Bytes: b}, true
}

func (f *fakeExport) ReadSpan(b []byte, off int64) (nbd.Span, error) {
	if f.failAt > 0 && off >= f.failAt {
		return nbd.Span{}, errors.New("server gone")
	}
	f.note(off)
	return nbd.Span{Bytes: b}, nil
}

func (f *fakeExport) note(off int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[int64]int{}
	}
	f.seen[off]++
}

func TestReplayExport(t *testing.T) {
	trace := &Trace{Reads: []Read{{0, 4096}, {4096, 131072}, {1 << 20, 65536}, {8 << 20, 4096}}}
	for _, tc := range []struct {
		name    string
		e       *fakeExport
		depth   int
		want    int64 // bytes
		reads   int   // distinct offsets read
		wantErr bool
	}{
		{"every read once, depth 1", &fakeExport{size: 16 << 20}, 1, 4096 + 131072 + 65536 + 4096, 4, false},
		{"every read once, depth 8", &fakeExport{size: 16 << 20}, 8, 4096 + 131072 + 65536 + 4096, 4, false},
		{"hits answered on the request loop", &fakeExport{size: 16 << 20, now: true}, 4, 4096 + 131072 + 65536 + 4096, 4, false},
		{"a failed read ends the replay with its error", &fakeExport{size: 16 << 20, failAt: 1 << 20}, 1, 4096 + 131072, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var moved int64
			var mu sync.Mutex
			got, err := replayExport(context.Background(), tc.e, trace, tc.depth, func(n int64) { mu.Lock(); moved += n; mu.Unlock() })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want || moved != tc.want {
				t.Errorf("replayed %d bytes, moved %d; want %d", got, moved, tc.want)
			}
			if len(tc.e.seen) != tc.reads {
				t.Errorf("read %d distinct offsets (%v), want %d", len(tc.e.seen), tc.e.seen, tc.reads)
			}
			for off, n := range tc.e.seen {
				if n != 1 {
					t.Errorf("offset %d read %d times, want once", off, n)
				}
			}
		})
	}
}
