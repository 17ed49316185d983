package storm

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/internal/storm"
)

func fixture() *report {
	o := &options{clients: []int{1, 200}, firmwares: []string{"uefi"}, stacks: []string{"bootfleet", "peer"},
		runs: 1, rate: "1gbit", trace: "t.trace", timeout: time.Minute, work: "/w", ipxeDir: "/usr/lib/ipxe", out: "BENCHMARKS-storm.md"}
	rep := func(n, booted int, wall, p50, p99 float64, failures map[string]int) *storm.Report {
		return &storm.Report{Clients: n, Summary: storm.Summary{Booted: booted, Failed: n - booted, WallSeconds: wall,
			Phases: map[string]storm.Stats{"boot": {Count: n, P50: p50, P99: p99}}, Failures: failures}}
	}
	return &report{Host: harness.Host{Date: "2026-11-26 00:00 UTC", CPUs: 2}, Opts: o,
		Files: map[string]int64{"ipxe.efi": 1 << 20, "vmlinuz": 8 << 20, "initrd.img": 40 << 20, "trace reads": 48 << 20},
		Runs: []run{
			{Stack: "bootfleet", Firmware: "uefi", N: 1, Report: rep(1, 1, 1.0, 1.0, 1.0, nil), PeakRSS: 60 << 20},
			{Stack: "peer", Firmware: "uefi", N: 1, Report: rep(1, 1, 1.2, 1.2, 1.2, nil)},
			{Stack: "bootfleet", Firmware: "uefi", N: 200, Report: rep(200, 200, 180, 150, 178, nil), PeakRSS: 300 << 20},
			{Stack: "peer", Firmware: "uefi", N: 200, Report: rep(200, 199, 400, 300, 390,
				map[string]int{"tftp: no answer to RRQ for ipxe.efi": 1})},
		}}
}

func TestLimit(t *testing.T) {
	r := fixture()
	// 200 machines × (1 MiB TFTP + 96 MiB TCP) with framing, at 1 Gbit/s.
	want := 200 * (float64(1<<20)*tftpWire + float64(96<<20)*tcpWire) * 8 / 1e9
	if got := r.limit("uefi", 200); math.Abs(got-want) > 1e-9 {
		t.Errorf("limit(uefi, 200) = %v, want %v", got, want)
	}
	if got, noTFTP := r.limit("ipxe", 1), float64(96<<20)*tcpWire*8/1e9; math.Abs(got-noTFTP) > 1e-9 {
		t.Errorf("limit(ipxe, 1) = %v, want %v: iPXE in ROM fetches no NBP", got, noTFTP)
	}
}

func TestRender(t *testing.T) {
	got := fixture().render()
	reportHas(t, got,
		"| 200 uefi machines all booted within 1.15× the link limit | 180.0 s against a limit of 172.8 s (1.04×), 200 booted, 0 failed | met |",
		"| fairness: p99/p50 of per-machine boot time at most 1.3 at N = 200 | p50 150.0 s, p99 178.0 s: 1.19 | met |",
		"| server memory bounded and reported at N = 200 | peak RSS 300 MiB | reported |",
		"| ahead of the peer stack at every N | ahead at every N | met |",
		"| 200 | 172.8 s | peer | 400.0 s | 2.31× | 199 | 1 |",
		"- peer, uefi, N=200, run 0: 1× tftp: no answer to RRQ for ipxe.efi",
		"**one read-only export to every machine: no per-machine overlay**",
	)
}

// TestTiedAtLimit: two stacks that both finish at the link limit are tied,
// not behind, and the report says why neither can be ahead.
func TestTiedAtLimit(t *testing.T) {
	r := fixture()
	lim := r.limit("uefi", 200)
	r.Runs[2].Report.Summary.WallSeconds = 1.01 * lim
	r.Runs[3].Report = &storm.Report{Clients: 200, Summary: storm.Summary{Booted: 200, WallSeconds: 1.0 * lim,
		Phases: map[string]storm.Stats{"boot": {Count: 200, P50: 150, P99: 170}}}}
	got := r.render()
	reportHas(t, got,
		"| ahead of the peer stack at every N | ahead at uefi N=1 (1.00 s against 1.20 s); tied (within 2%) at uefi N=200 (174.56 s against 172.83 s) | **not met** |",
		"A tie there is the physical best",
	)
}

func TestTargetsNotMet(t *testing.T) {
	r := fixture()
	r.Runs[2].Report.Summary.WallSeconds = 250 // slower than 1.15× the limit
	r.Runs[0].Report.Summary.WallSeconds = 1.3 // behind the peer at N = 1
	got := r.render()
	reportHas(t, got,
		"(1.45×), 200 booted, 0 failed | **not met** |",
		"| ahead of the peer stack at every N | ahead at uefi N=200 (the peer failed 1 of 200); behind at uefi N=1 (1.30 s against 1.20 s) | **not met** |",
	)
}

// TestPlots draws both plots from a fixture whose machines booted at known
// times, and the report shows them.
func TestPlots(t *testing.T) {
	r := fixture()
	r.Opts.plots = t.TempDir()
	for i := range r.Runs {
		rep := r.Runs[i].Report
		for k := range rep.Summary.Booted {
			rep.Machines = append(rep.Machines, storm.Machine{Result: "ok", Boot: rep.Summary.WallSeconds * float64(k+1) / float64(rep.Summary.Booted)})
		}
	}
	var err error
	if r.Plots, err = r.writePlots(r.Opts.plots); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{r.Plots.booted, r.Plots.scaling} {
		if f == "" {
			t.Fatalf("a plot was left out: %+v", r.Plots)
		}
		raw, err := os.ReadFile(filepath.Join(r.Opts.plots, f))
		if err != nil || !bytes.HasPrefix(raw, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", f, err)
		}
	}
	got := r.render()
	reportHas(t, got,
		"![machines booted against time, N = 200]("+r.Opts.plots+"/storm-booted.png)",
		"![time until every machine booted against N]("+r.Opts.plots+"/storm-scaling.png)",
		"the first booted after 0.9 s, half after 90.0 s, the last after 180.0 s. Served one after another on the same link, half would have been up after 86.4 s",
	)
}

// TestNoPlotWithoutRuns: nothing to draw is no plot and no error.
func TestNoPlotWithoutRuns(t *testing.T) {
	r := fixture()
	r.Runs = nil
	pl, err := r.writePlots(t.TempDir())
	if err != nil || pl != (plots{}) {
		t.Errorf("writePlots with no runs = %+v, %v; want none, nil", pl, err)
	}
}

// reportHas fails t for each of wants that got lacks, and then logs got.
func reportHas(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestCountTicks(t *testing.T) {
	for _, tt := range []struct {
		hi    float64
		first string
		n     int
	}{{270, "0", 6}, {6.75, "0", 7}, {1.35, "0", 2}} {
		ts := countTicks{}.Ticks(0, tt.hi)
		if len(ts) != tt.n || ts[0].Label != tt.first {
			t.Errorf("Ticks(0, %v) = %+v, want %d ticks from %s", tt.hi, ts, tt.n, tt.first)
		}
	}
}
