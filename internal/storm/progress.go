package storm

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// tracker counts the machines in each phase for Progress.
type tracker struct {
	mu     sync.Mutex
	t0     time.Time
	phase  []string // "wait" until powered on, then the phase, then "ok" or "failed"
	ok     int
	failed int
	bytes  int64
}

func newTracker(n int, t0 time.Time) *tracker {
	t := &tracker{t0: t0, phase: make([]string, n)}
	for i := range t.phase {
		t.phase[i] = "wait"
	}
	return t
}

func (t *tracker) move(i int, phase string) {
	t.mu.Lock()
	t.phase[i] = phase
	t.mu.Unlock()
}

func (t *tracker) moved(n int64) {
	t.mu.Lock()
	t.bytes += n
	t.mu.Unlock()
}

// finish records machine i's end.
func (t *tracker) finish(i int, rep *Machine) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rep.Result == "ok" {
		t.ok++
		t.phase[i] = "ok"
	} else {
		t.failed++
		t.phase[i] = "failed"
	}
}

func (t *tracker) snapshot() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := Progress{Clients: len(t.phase), Phase: map[string]int{}, OK: t.ok, Failed: t.failed,
		Bytes: t.bytes, Elapsed: time.Since(t.t0)}
	for _, ph := range t.phase {
		if ph != "ok" && ph != "failed" {
			p.Phase[ph]++
		}
	}
	return p
}

// report calls fn every 200 ms until stop, which calls it a last time.
func (t *tracker) report(fn func(Progress)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				p := t.snapshot()
				p.Done = true
				fn(p)
				return
			case <-tick.C:
				fn(t.snapshot())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// ProgressPrinter returns a Progress callback for w: a bar redrawn in
// place when w is a terminal, else a line every interval.
func ProgressPrinter(w io.Writer, terminal bool, interval time.Duration) func(Progress) {
	var last time.Time
	return func(p Progress) {
		if terminal {
			const width = 30
			filled := width * (p.OK + p.Failed) / max(p.Clients, 1)
			fmt.Fprintf(w, "\r[%s%s] %d/%d ok %d failed %d | %s| %s %5.1fs\x1b[K",
				strings.Repeat("#", filled), strings.Repeat(".", width-filled),
				p.OK+p.Failed, p.Clients, p.OK, p.Failed, phaseCounts(p), byteSize(p.Bytes), p.Elapsed.Seconds())
			if p.Done {
				fmt.Fprintln(w)
			}
			return
		}
		if p.Done || time.Since(last) >= interval {
			last = time.Now()
			fmt.Fprintf(w, "storm: %.0fs: %d of %d finished (ok %d, failed %d); %s%s\n",
				p.Elapsed.Seconds(), p.OK+p.Failed, p.Clients, p.OK, p.Failed, phaseCounts(p), byteSize(p.Bytes))
		}
	}
}

func phaseCounts(p Progress) string {
	var b strings.Builder
	for _, name := range append([]string{"wait"}, PhaseNames...) {
		if n := p.Phase[name]; n > 0 {
			fmt.Fprintf(&b, "%s %d ", name, n)
		}
	}
	return b.String()
}

// byteSize prints n in binary units, as the table does.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
