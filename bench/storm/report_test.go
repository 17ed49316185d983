package storm

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/internal/storm"
)

func fixture() *report {
	o := &options{clients: []int{1, 200}, firmwares: []string{"uefi"}, stacks: []string{"bootfleet", "peer"},
		runs: 1, rate: "1gbit", trace: "t.trace", timeout: time.Minute, work: "/w", ipxeDir: "/usr/lib/ipxe"}
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
	for _, want := range []string{
		"| 200 uefi machines all booted within 1.15× the link limit | 180.0 s against a limit of 172.8 s (1.04×), 200 booted, 0 failed | met |",
		"| fairness: p99/p50 of per-machine boot time at most 1.3 at N = 200 | p50 150.0 s, p99 178.0 s: 1.19 | met |",
		"| server memory bounded and reported at N = 200 | peak RSS 300 MiB | reported |",
		"| ahead of the peer stack at every N | ahead at every N | met |",
		"| 200 | 172.8 s | peer | 400.0 s | 2.31× | 199 | 1 |",
		"- peer, uefi, N=200, run 0: 1× tftp: no answer to RRQ for ipxe.efi",
		"**one read-only export to every machine: no per-machine overlay**",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestTargetsNotMet(t *testing.T) {
	r := fixture()
	r.Runs[2].Report.Summary.WallSeconds = 250 // slower than 1.15× the limit
	r.Runs[0].Report.Summary.WallSeconds = 1.3 // behind the peer at N = 1
	got := r.render()
	for _, want := range []string{
		"(1.45×), 200 booted, 0 failed | **not met** |",
		"| ahead of the peer stack at every N | behind or tied at uefi N=1 (1.3 s against 1.2 s) | **not met** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
