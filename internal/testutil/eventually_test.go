package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventuallyReturnsOnceTheFactHolds(t *testing.T) {
	calls := 0
	Eventually(t, 5*time.Second, "the third call", func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond ran %d times, want 3 (until it held)", calls)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	calls := 0
	start := time.Now()
	Eventually(rec, 50*time.Millisecond, "a fact that never holds", func() error {
		calls++
		return errors.New("still false")
	})
	if took := time.Since(start); took < 50*time.Millisecond || took > 2*time.Second {
		t.Errorf("gave up after %v, want just past 50ms", took)
	}
	for _, want := range []string{"a fact that never holds", "still false", "50ms"} {
		if !strings.Contains(rec.msg, want) {
			t.Errorf("failure %q lacks %q", rec.msg, want)
		}
	}
	if calls < 2 {
		t.Errorf("cond ran %d times, want it polled", calls)
	}
}
