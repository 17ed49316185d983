package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// TestRender checks the report's arithmetic on fixed samples: medians,
// the on-vs-off difference and the CPU per GB.
func TestRender(t *testing.T) {
	s := func(h, tf, cpu float64) sample {
		return sample{http: time.Duration(h * 1e9), tftp: time.Duration(tf * 1e9), cpu: time.Duration(cpu * 1e9)}
	}
	res := map[string][]sample{
		"on":  {s(1.1, 0.5, 0.26), s(1.0, 0.6, 0.30), s(1.2, 0.5, 0.28)},
		"off": {s(1.0, 0.5, 0.25), s(1.0, 0.5, 0.25), s(1.0, 0.5, 0.25)},
	}
	h, tf := clientCommands("/dev/shm/x")
	got := render(options{rounds: 3}, harness.Host{Date: "2026-11-26 00:00 UTC"}, res, h, tf, "/dev/shm/x")
	for _, want := range []string{
		"| HTTP, 200 MiB | 1.000 s (210 MB/s) | 1.100 s (191 MB/s) | +10.0% | 2 of 3 (p = 1.00) |",
		"| TFTP, 50 MiB | 0.500 s (105 MB/s) | 0.500 s (105 MB/s) | +0.0% | 1 of 3 (p = 1.00) |",
		"| server CPU per GB served (both downloads) | 0.95 s | 1.07 s | +12.0% | 3 of 3 (p = 0.25) |",
		"curl -sf -o $WORK/dl/http.bin",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
