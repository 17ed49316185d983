package storm

import (
	"math"
	"testing"

	"github.com/bootfleet/bootfleet/internal/storm"
)

// mcastFixture adds the multicast stacks to fixture at N = 1 and 200.
func mcastFixture(mcastWall, droppedWall float64, failed int) *report {
	r := fixture()
	r.Opts.stacks = stackNames
	rep := func(n, booted int, wall float64, root *storm.RootSummary) *storm.Report {
		return &storm.Report{Clients: n, Summary: storm.Summary{Booted: booted, Failed: n - booted, WallSeconds: wall,
			Phases: map[string]storm.Stats{"boot": {Count: n, P50: 0.9 * wall, P99: wall}}, Root: root}}
	}
	on := &storm.RootSummary{Machines: 200, MulticastBytes: 200 * 48 << 20, Multicast: map[string]int{"on": 200}}
	r.Runs = append(r.Runs,
		run{Stack: stackMulticast, Firmware: "uefi", N: 1, Report: rep(1, 1, 1.5, nil)},
		run{Stack: stackDropped, Firmware: "uefi", N: 1, Report: rep(1, 1, 3.0, nil)},
		run{Stack: stackMulticast, Firmware: "uefi", N: 200, Report: rep(200, 200-failed, mcastWall, on)},
		run{Stack: stackDropped, Firmware: "uefi", N: 200, Report: rep(200, 200, droppedWall, nil)},
	)
	return r
}

func TestMcastLimit(t *testing.T) {
	r := fixture()
	// 200 × (1 MiB TFTP + 40 MiB TCP) + 8 MiB of kernel once by MTFTP +
	// 48 MiB once by multicast, at 1 Gbit/s.
	want := (200*(float64(1<<20)*tftpWire+float64(40<<20)*tcpWire) + float64(8<<20)*mtftpWire + float64(48<<20)*mcastWire) * 8 / 1e9
	if got := r.mcastLimit("uefi", 200); math.Abs(got-want) > 1e-9 {
		t.Errorf("mcastLimit(uefi, 200) = %v, want %v", got, want)
	}
	if got, uni := r.limitFor(stackDropped, "uefi", 200), r.limit("uefi", 200); got != uni {
		t.Errorf("dropped multicast is held to %v, want the unicast limit %v", got, uni)
	}
}

func TestMulticastTargets(t *testing.T) {
	lim := fixture().mcastLimit("uefi", 200)
	for _, tc := range []struct {
		name string
		r    *report
		want []string
	}{
		{"met", mcastFixture(0.95*lim, 181, 0), []string{
			"| 200 machines all booted within 1.15× (N × U + K + W) / link, none failed | 69.9 s against 73.6 s (0.95×), 200 booted, 0 failed | met |",
			"| at N = 200, at least 5× faster than unicast bootfleet with the Debian trace | 69.9 s against 180.0 s: 2.58× (the two links' limits allow 2.35×) | **not met** |",
			"| with multicast dropped by the network, within 1.05× of the unicast run | N=1 3.0 s against 1.0 s (3.00×), N=200 181.0 s against 180.0 s (1.01×) | **not met** |",
			"| uefi | 200 | bootfleet-multicast | on 200 | 48.0 MiB | 0.0 MiB |",
		}},
		{"a failed machine fails the first target", mcastFixture(0.95*lim, 181, 1), []string{
			"199 booted, 1 failed | **not met** |",
			"| ahead of unicast bootfleet and of the peer at every N ≥ 5 | behind or failed at bootfleet N=200",
		}},
		{"fast enough", mcastFixture(30, 181, 0), []string{
			"| at N = 200, at least 5× faster than unicast bootfleet with the Debian trace | 30.0 s against 180.0 s: 6.00× (the two links' limits allow 2.35×) | met |",
			"| ahead of unicast bootfleet and of the peer at every N ≥ 5 | ahead at every N ≥ 5: bootfleet N=200 (30.0 s against 180.0 s), peer N=200 (30.0 s against 400.0 s) | met |",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { reportHas(t, tc.r.render(), tc.want...) })
	}
}

// TestRootsTable: the roots table shows each machine's read-ahead and what
// the group sent against what one machine took, from the server's
// /metrics.
func TestRootsTable(t *testing.T) {
	g := parseGroupSent("# HELP x\nbootfleet_multicast_sent_bytes_total 1.2582912e+08\nbootfleet_multicast_again_bytes_total 4194304\nother 7\n")
	if g.Bytes != 120<<20 || g.Again != 4<<20 {
		t.Fatalf("parsed %+v, want 120 MiB sent, 4 MiB again", g)
	}
	r := mcastFixture(30, 100, 0)
	r.Opts.warmUp = true
	for i := range r.Runs {
		if x := &r.Runs[i]; x.Stack == stackMulticast && x.N == 200 {
			x.GroupBytes = g.Bytes
			x.Report.Summary.Root.AheadChunks, x.Report.Summary.Root.AheadUsed = 200*300, 200*290
		}
	}
	reportHas(t, r.render(), "| uefi | 200 | bootfleet-multicast | on 200 | 48.0 MiB | 0.0 MiB | 0.0 MiB | 300 | 290 | 120 MiB (2.5×) | 0 | 0 | 0 |",
		"one machine boots the same content against the same server, not counted",
		"every machine holds back its requests until it has read them")
}

// TestImagesTable: the images table shows per machine what came from
// the MTFTP group and what by unicast, and the dropped stack's fallbacks.
func TestImagesTable(t *testing.T) {
	r := mcastFixture(30, 181, 0)
	for i, x := range r.Runs {
		if x.N != 200 || x.Report == nil {
			continue
		}
		x.Report.Machines = make([]storm.Machine, 200)
		switch x.Stack {
		case stackMulticast:
			x.Report.Summary.Images = &storm.ImageSummary{Fetches: 400, MulticastBytes: 200 * 8 << 20, UnicastBytes: 200 * 40 << 20, MTFTP: 200}
			x.MTFTPBytes, x.MTFTPCycles = 24<<20, 3
		case stackDropped:
			x.Report.Summary.Images = &storm.ImageSummary{Fetches: 400, UnicastBytes: 200 * 48 << 20, MTFTPFellBack: 200}
		}
		r.Runs[i] = x
	}
	reportHas(t, r.render(),
		"| uefi | 200 | bootfleet-multicast | 8.0 MiB | 40.0 MiB | 200 | 0 | 0 | 24 MiB (3.0×), 3 cycles |",
		"| uefi | 200 | bootfleet-multicast-dropped | 0.0 MiB | 48.0 MiB | 0 | 200 | 0 | – |")
}
