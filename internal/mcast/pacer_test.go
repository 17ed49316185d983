package mcast

import (
	"context"
	"testing"
	"time"
)

// TestPacerHoldsTheRateAndForgivesLateWakeups drives the pacer with a
// clock the test moves: sleeps advance it, by more than asked when the
// test says the machine was late.
func TestPacerHoldsTheRateAndForgivesLateWakeups(t *testing.T) {
	for _, late := range []time.Duration{0, 3 * time.Millisecond} {
		now := time.Unix(0, 0)
		p := NewPacer(1_000_000, 10_000)
		p.now = func() time.Time { return now }
		sleeps := 0
		p.sleep = func(_ context.Context, d time.Duration) error {
			sleeps++
			now = now.Add(d + late)
			return nil
		}
		const sends, n = 1000, 1000
		for range sends {
			if err := p.Wait(t.Context(), n); err != nil {
				t.Fatal(err)
			}
		}
		// 1 MB at 1 MB/s less the first burst of 10 kB: 0.99 s, and a late
		// wake-up is paid back from the bucket rather than added up. The
		// last sleep may also refill half a burst (5 ms) it never uses.
		got := now.Sub(time.Unix(0, 0))
		if got < 990*time.Millisecond || got > 995*time.Millisecond+late+time.Millisecond {
			t.Errorf("late %v: %d sends of %d bytes at 1 MB/s took %v, want 0.99 s", late, sends, n, got)
		}
		// Half a burst is five sends: one sleep per five or six of them,
		// not one per send.
		if sleeps > sends/4 {
			t.Errorf("late %v: %d sleeps for %d sends, want at most %d", late, sleeps, sends, sends/4)
		}
	}
}

// TestPacerBurstCoversLateTimers: every sleep wakes no sooner than a
// millisecond, as Go's timers do on an idle process; with the bucket
// Burst gives, the pacer still sends at its rate, where a bucket of 16
// datagrams held 500 Mbit/s to about a third of it.
func TestPacerBurstCoversLateTimers(t *testing.T) {
	const rate, size, sends = 62_500_000, 1126, 20_000 // 500 Mbit/s
	for _, tc := range []struct {
		name  string
		burst int64
		ok    bool
	}{
		{"Burst", Burst(rate, size), true},
		{"16 datagrams", 16 * size, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			p := NewPacer(rate, tc.burst)
			p.now = func() time.Time { return now }
			p.sleep = func(_ context.Context, d time.Duration) error {
				now = now.Add(max(d, time.Millisecond) + 200*time.Microsecond)
				return nil
			}
			for range sends {
				if err := p.Wait(t.Context(), size); err != nil {
					t.Fatal(err)
				}
			}
			want := time.Duration(float64(sends*size) / rate * float64(time.Second))
			got := now.Sub(time.Unix(0, 0))
			if held := got < want*11/10; held != tc.ok {
				t.Errorf("burst %d bytes: %d sends took %v, %.2fx the %v the rate allows; want the rate held: %v",
					tc.burst, sends, got, float64(got)/float64(want), want, tc.ok)
			}
		})
	}
}
