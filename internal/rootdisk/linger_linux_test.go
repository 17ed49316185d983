package rootdisk

import (
	"io"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestImageLingers: a base image in memory stays open after its last
// session for the next boot to find, closes once the linger has passed,
// and closes at once when its content is released or the manager closes.
// One on a disk closes at once.
func TestImageLingers(t *testing.T) {
	session := func(t *testing.T, f *fixture, mac string) (io.Closer, *blockstore.Image) {
		t.Helper()
		e, err := f.m.Lookup(f.issue(t, mac, "ephemeral"), tcp("10.0.0.9"))
		if err != nil {
			t.Fatal(err)
		}
		return e.(io.Closer), f.m.att[mac].base.(*blockstore.Image)
	}
	open := func(f *fixture) int {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return len(f.m.images)
	}
	for _, tc := range []struct {
		name  string
		end   func(t *testing.T, f *fixture) // ends the linger
		after time.Duration
	}{
		{"linger passes", func(t *testing.T, f *fixture) {}, 50 * time.Millisecond},
		{"content released", func(t *testing.T, f *fixture) {
			f.m.mu.Lock()
			f.m.boot = map[string]*boot{} // no boot pins it any more
			f.m.mu.Unlock()
			if deleted, err := release(f.m, f.img.SHA256); err != nil || !deleted {
				t.Fatalf("release: deleted=%v err=%v", deleted, err)
			}
		}, time.Hour},
		{"manager closed", func(t *testing.T, f *fixture) {
			if err := f.m.Close(); err != nil {
				t.Fatal(err)
			}
		}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fixtureIn(t, testutil.ShmDir(t))
			f.m.cfg.ImageLinger = tc.after
			c, first := session(t, f, "52:54:00:00:00:01")
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if n := open(f); n != 1 {
				t.Fatalf("right after the last session: %d images open, want 1 (lingering)", n)
			}
			c, again := session(t, f, "52:54:00:00:00:03")
			if again != first {
				t.Fatal("the next boot opened the image anew instead of taking the lingering one")
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			tc.end(t, f)
			deadline := time.Now().Add(5 * time.Second)
			for open(f) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the image is still open 5 s after its linger (%v) ended", tc.after)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, ok := first.ReadNow(make([]byte, 64<<10), 0, false); ok {
				t.Fatal("the closed image still hands out its mapping")
			}
		})
	}
}

// TestDiskImageDoesNotLinger: an image on a disk closes with its last
// session, so no mapping keeps its pages from a cache drop.
func TestDiskImageDoesNotLinger(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.ImageLinger = time.Hour
	e, err := f.m.Lookup(f.issue(t, "52:54:00:00:00:01", "ephemeral"), tcp("10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if f.m.att["52:54:00:00:00:01"].base.InMemory() {
		testutil.SkipUnlessCI(t, "the test's temp dir is in memory, not on a disk")
	}
	if err := e.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.m.images); n != 0 {
		t.Fatalf("after the last session of an image on a disk: %d images open, want 0", n)
	}
}
