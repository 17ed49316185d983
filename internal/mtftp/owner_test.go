package mtftp

import (
	"slices"
	"testing"
	"time"
)

// TestOwnerOneFileAtATime: the group is one file's until Lapse after its
// last renewal, and never another's while the carousel sends.
func TestOwnerOneFileAtATime(t *testing.T) {
	type step struct {
		at      time.Duration
		path    string // "" marks the carousel busy (+) or idle (-) by busy
		busy    string
		granted bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"free group goes to the first", []step{{0, "k1", "", true}, {time.Second, "k1", "", true}}},
		{"another waits for the lapse", []step{{0, "k1", "", true}, {30 * time.Second, "k2", "", false},
			{Lapse - time.Nanosecond, "k2", "", false}, {Lapse, "k2", "", true}, {Lapse + time.Second, "k1", "", false}}},
		{"a renewal restarts the lapse", []step{{0, "k1", "", true}, {50 * time.Second, "k1", "", true},
			{100 * time.Second, "k2", "", false}, {110 * time.Second, "k2", "", true}}},
		{"the carousel holds it however long it sends", []step{{0, "k1", "", true}, {0, "", "+", false},
			{5 * Lapse, "k2", "", false}, {5 * Lapse, "", "-", false}, {6*Lapse - time.Second, "k2", "", false}, {6 * Lapse, "k2", "", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			o := owner{now: func() time.Time { return now }}
			t0 := time.Unix(1000, 0)
			for i, s := range tt.steps {
				now = t0.Add(s.at)
				if s.path == "" {
					o.sending(s.busy == "+")
					continue
				}
				if got := o.grant(s.path); got != s.granted {
					t.Fatalf("step %d: grant(%s) at %v = %v, want %v", i, s.path, s.at, got, s.granted)
				}
			}
		})
	}
}

// TestGrantRefusesLargeFiles: at MaxSize the last block is number 65535;
// a byte more and iPXE's block numbers would wrap.
func TestGrantRefusesLargeFiles(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want bool
	}{{-1, true}, {0, true}, {MaxSize, true}, {MaxSize + 1, false}, {65535 * 512 * 2, false}} {
		s := New(Config{})
		if got := s.Grant("k", tt.size); got != tt.want {
			t.Errorf("Grant(k, %d) = %v, want %v", tt.size, got, tt.want)
		}
	}
	if n := blocksOf(MaxSize); n != 65535 {
		t.Errorf("blocksOf(MaxSize) = %d, want 65535", n)
	}
}

// TestCarouselCycles: an RRQ owes one cycle from where the carousel is;
// one mid-cycle extends it to a full cycle from there.
func TestCarouselCycles(t *testing.T) {
	c := newCarousel(3*BlockSize + 10) // blocks 1..4
	take := func(n int) []int {
		var got []int
		for range n {
			b, ok := c.take()
			if !ok {
				break
			}
			got = append(got, b)
		}
		return got
	}
	if got := take(1); got != nil {
		t.Fatalf("no RRQ yet, took %v", got)
	}
	c.want()
	if got := take(2); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("took %v, want 1 2", got)
	}
	c.want() // a second client asks at block 3
	if got := take(10); !slices.Equal(got, []int{3, 4, 1, 2}) {
		t.Fatalf("after a second RRQ took %v, want 3 4 1 2 and a stop", got)
	}
	if c.cycles != 1 {
		t.Errorf("cycles %d after 6 blocks of 4, want 1", c.cycles)
	}
	c.want()
	if got := take(10); !slices.Equal(got, []int{3, 4, 1, 2}) {
		t.Fatalf("a later RRQ took %v, want 3 4 1 2", got)
	}
}
