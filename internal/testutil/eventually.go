package testutil

import (
	"testing"
	"time"
)

// Eventually calls cond until it returns nil, and fails t if it has not
// within the given time, with what was awaited and cond's last error:
// the error says what the test saw instead of the fact it waited for.
// cond runs on the test's goroutine, first at once, then every few
// milliseconds, the pause growing to 100 ms so a slow fact costs little
// CPU on a shared machine.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v still waiting for %s: %v", within, what, err)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
