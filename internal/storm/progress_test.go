package storm

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressPrinter(t *testing.T) {
	running := Progress{Clients: 10, Phase: map[string]int{"wait": 2, "tftp": 5}, OK: 2, Failed: 1, Bytes: 3 << 20, Elapsed: 1500 * time.Millisecond}
	done := Progress{Clients: 10, Phase: map[string]int{"wait": 7}, OK: 2, Failed: 1, Bytes: 5 << 20, Elapsed: 2 * time.Second, Done: true}

	t.Run("terminal", func(t *testing.T) {
		var b bytes.Buffer
		p := ProgressPrinter(&b, true, time.Hour)
		p(running)
		p(running)
		if got := b.String(); strings.Count(got, "\r") != 2 || strings.Contains(got, "\n") || !strings.Contains(got, "3/10 ok 2 failed 1 | wait 2 tftp 5 | 3.0 MiB") {
			t.Fatalf("bar redrawn in place: got %q", got)
		}
		p(done)
		if !strings.HasSuffix(b.String(), "\n") {
			t.Fatalf("the last bar must end its line: %q", b.String())
		}
	})
	t.Run("log", func(t *testing.T) {
		var b bytes.Buffer
		p := ProgressPrinter(&b, false, time.Hour)
		p(running)
		p(running) // within the interval: nothing
		p(done)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "storm: 2s: 3 of 10 finished (ok 2, failed 1); wait 7 5.0 MiB") {
			t.Fatalf("want a line at the start and one at the end, got %q", lines)
		}
	})
}
