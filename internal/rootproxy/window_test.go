package rootproxy

import (
	"testing"
	"time"
)

// TestWindow: the read-ahead window starts small, grows while what it
// asked is read, stops at its ceiling, is cut by half on a loss or a
// repair (once per event), to nothing for windowHold when this machine's
// socket overflowed, and a ceiling of 0 is no read-ahead.
func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		used  int           // chunks asked ahead read before the look
		h     health        // the receiver's counters at the look
		after time.Duration // when, since t0
		want  int           // the lead then
	}
	for _, tc := range []struct {
		name    string
		ceiling int
		steps   []step
	}{
		{"zero ceiling is off", 0, []step{{0, health{}, 0, 0}, {10, health{}, time.Second, 0}}},
		{"starts small", 16, []step{{0, health{}, 0, windowStart}}},
		{"a ceiling below the start", 1, []step{{0, health{}, 0, 1}, {5, health{}, 0, 1}}},
		{"grows a chunk per chunk used", 16, []step{{0, health{}, 0, 2}, {3, health{}, 0, 5}, {6, health{}, 0, 11}}},
		{"stops at the ceiling", 16, []step{{0, health{}, 0, 2}, {100, health{}, 0, 16}}},
		{"halves on a loss", 16, []step{{100, health{}, 0, 16}, {0, health{Lost: 3}, time.Second, 8}}},
		{"halves on a repair", 16, []step{{100, health{}, 0, 16}, {0, health{Repairs: 1}, time.Second, 8}}},
		{"a loss and its repair cut once", 16, []step{
			{100, health{}, 0, 16},
			{0, health{Lost: 3}, time.Second, 8},
			{0, health{Lost: 3, Repairs: 1}, time.Second + windowCalm/2, 8},
			{0, health{Lost: 9, Repairs: 2}, time.Second + windowCalm, 4},
		}},
		{"never halves below one", 16, []step{
			{0, health{Lost: 1}, time.Second, 1},
			{0, health{Lost: 2}, 2 * time.Second, 1},
		}},
		{"grows slowly after a cut", 16, []step{
			{100, health{}, 0, 16},
			{0, health{Lost: 1}, time.Second, 8},
			{7, health{Lost: 1}, time.Second, 8},
			{1, health{Lost: 1}, time.Second, 9},
			{9, health{Lost: 1}, time.Second, 10},
		}},
		{"overflow holds it at nothing", 16, []step{
			{100, health{}, 0, 16},
			{0, health{Overflow: 40, Lost: 40}, time.Second, 0},
			{5, health{Overflow: 40, Lost: 40}, time.Second + windowHold/2, 0},
			{0, health{Overflow: 40, Lost: 40}, time.Second + windowHold, windowStart},
			// Up to half the window before the overflow, one a chunk.
			{6, health{Overflow: 40, Lost: 40}, time.Second + windowHold, 8},
			{8, health{Overflow: 40, Lost: 40}, time.Second + windowHold, 9},
		}},
		{"overflow during a hold holds again", 16, []step{
			{0, health{Overflow: 1}, 0, 0},
			{0, health{Overflow: 2}, windowHold - time.Millisecond, 0},
			{0, health{Overflow: 2}, windowHold + time.Millisecond, 0},
			{0, health{Overflow: 2}, 2 * windowHold, windowStart},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWindow(tc.ceiling)
			for i, s := range tc.steps {
				for range s.used {
					w.used()
				}
				if got := w.lead(s.h, t0.Add(s.after)); got != s.want {
					t.Fatalf("step %d (%d used, %+v at +%v): lead %d, want %d", i, s.used, s.h, s.after, got, s.want)
				}
			}
		})
	}
}
