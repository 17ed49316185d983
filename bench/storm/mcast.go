package storm

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// desktopBytes is the working set from which a trace is held to the
// desktop trace's target (20× unicast at the largest N) rather than the
// Debian trace's (5×).
const desktopBytes = 300 << 20

// The reports of the two traces `make bench-storm` runs.
const (
	debianReport  = "BENCHMARKS-storm.md"
	desktopReport = "BENCHMARKS-storm-desktop.md"
)

// renderMulticastTargets writes issue 31's storm targets, each read
// strictly, for the trace this report replayed.
func (r *report) renderMulticastTargets(p func(string, ...any)) {
	o := r.Opts
	top := o.clients[len(o.clients)-1]
	fw := o.firmwares[0]
	m := r.row(stackMulticast, fw, top)
	if m == nil {
		return
	}
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	desktop := r.Files["trace reads"] >= desktopBytes
	which, speedup := "the Debian trace", 5.0
	if desktop {
		which, speedup = "the desktop trace", 20.0
	}
	p("## Multicast targets, strictly read (%s, %s, %s)\n\n| target | measured | |\n|---|---|---|\n", which, o.trace, fw)
	lim := r.mcastLimit(fw, top)
	met := m.wall <= 1.15*lim && m.failed == 0 && m.booted == top*len(m.runs)
	why := ""
	if busy := r.cpuBusy(m); !met && !math.IsNaN(busy) && m.serverCPU+m.clientCP > 0 {
		// Beside a miss, what the storm left of the CPUs tells whether
		// this machine could have played it any faster.
		why = fmt.Sprintf("; the storm used %.0f%% of the CPU time the %d CPUs had in its wall", 100*busy, r.Host.CPUs)
	}
	p("| %d machines all booted within 1.15× (N × U + K + W) / link, none failed | %s against %s (%s), %d booted, %d failed%s | %s |\n",
		top, secs(m.wall), secs(lim), times(m.wall, lim), m.booted, m.failed, why, mark(met))
	p("| p99/p50 of boot time at most 1.3 at N = %d | p50 %s, p99 %s: %s | %s |\n",
		top, secs(m.p50), secs(m.p99), ratio(m.p99, m.p50), mark(m.p99 <= 1.3*m.p50))
	if u := r.row(stackUnicast, fw, top); u != nil {
		// The ratio of the two limits is the most multicast of the root alone
		// can give: past it, only a smaller U (kernel and initrd) helps.
		p("| at N = %d, at least %.0f× faster than unicast bootfleet with %s | %s against %s: %.2f× (the two links' limits allow %.2f×) | %s |\n",
			top, speedup, which, secs(m.wall), secs(u.wall), u.wall/m.wall, r.limit(fw, top)/lim, mark(u.wall >= speedup*m.wall && m.failed == 0))
	}
	other, otherReport := "desktop trace (at least 20×)", desktopReport
	if desktop {
		other, otherReport = "Debian trace (at least 5×)", debianReport
	}
	p("| the same targets with the %s | in %s (`make bench-storm` writes both) | – |\n", other, otherReport)

	var behind, ahead []string
	for _, n := range o.clients {
		if n < 5 {
			continue
		}
		x := r.row(stackMulticast, fw, n)
		if x == nil {
			continue
		}
		for _, st := range []string{stackUnicast, stackPeer} {
			y := r.row(st, fw, n)
			if y == nil {
				continue
			}
			cell := fmt.Sprintf("%s N=%d (%.1f s against %.1f s)", st, n, x.wall, y.wall)
			if x.failed == 0 && x.wall < y.wall {
				ahead = append(ahead, cell)
			} else {
				behind = append(behind, cell)
			}
		}
	}
	if len(ahead)+len(behind) > 0 {
		got := "ahead at every N ≥ 5: " + strings.Join(ahead, ", ")
		if len(behind) > 0 {
			got = "behind or failed at " + strings.Join(behind, ", ")
		}
		p("| ahead of unicast bootfleet and of the peer at every N ≥ 5 | %s | %s |\n", got, mark(len(behind) == 0))
	}

	var cells []string
	ok, measured := true, false
	for _, n := range o.clients {
		d, u := r.row(stackDropped, fw, n), r.row(stackUnicast, fw, n)
		if d == nil || u == nil {
			continue
		}
		measured = true
		within := d.failed == 0 && d.wall <= 1.05*u.wall
		ok = ok && within
		cells = append(cells, fmt.Sprintf("N=%d %.1f s against %.1f s (%s)", n, d.wall, u.wall, times(d.wall, u.wall)))
	}
	if measured {
		p("| with multicast dropped by the network, within 1.05× of the unicast run | %s | %s |\n", strings.Join(cells, ", "), mark(ok))
	}
	p("\n")
}

// renderRoots tells, for the multicast stacks, what the machines' root
// proxies did: where their roots' bytes came from and how the group went.
func (r *report) renderRoots(p func(string, ...any)) {
	var lines []string
	for _, fw := range r.Opts.firmwares {
		for _, n := range r.Opts.clients {
			for _, st := range []string{stackMulticast, stackDropped} {
				x := r.medianRun(st, fw, n)
				if x == nil || x.Report.Summary.Root == nil {
					continue
				}
				rs := x.Report.Summary.Root
				var states []string
				for s, k := range rs.Multicast {
					states = append(states, fmt.Sprintf("%s %d", s, k))
				}
				sort.Strings(states)
				per := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/float64(rs.Machines)/(1<<20)) }
				ahead := func(c uint64) string { return fmt.Sprintf("%.0f", float64(c)/float64(rs.Machines)) }
				sent := "–"
				if mc := float64(rs.MulticastBytes) / float64(rs.Machines); x.GroupBytes > 0 && mc > 0 {
					sent = fmt.Sprintf("%.0f MiB (%.1f×)", x.GroupBytes/(1<<20), x.GroupBytes/mc)
				}
				lines = append(lines, fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |", fw, n, st, strings.Join(states, ", "),
					per(rs.MulticastBytes), per(rs.UnicastBytes), per(rs.HitBytes), ahead(rs.AheadChunks), ahead(rs.AheadUsed), sent, rs.Fallbacks, rs.Lost, rs.Repairs))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	p("## Where the roots' bytes came from\n\n")
	p("The root proxies' counters, summed over the machines of the median run (per machine where it says so). ")
	p("**group** is each machine's state of its group at the end: on, silent (nothing arrived: read by unicast) or lossy ")
	p("(lost too much: read by unicast, for itself alone). A miss that waited on the group and went to unicast is a fallback. ")
	p("**read ahead** is the 32 KiB chunks each machine asked the group for ahead of its reads, in the content's read order ")
	p("(learned by the server from the warm-up boot), and **of it read** those its boot then read. **group sent** is what the ")
	p("server multicast during the storm (its /metrics, datagram headers included), and in brackets that over what one machine ")
	p("took from the group: 1× would be every chunk sent once.\n\n")
	p("| firmware | N | stack | group | by multicast per machine | by unicast per machine | cache hits per machine | read ahead per machine | of it read | group sent | fallbacks | datagrams lost | repairs |\n")
	p("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	p("%s\n\n", strings.Join(lines, "\n"))
}

// groupSent is what the server's Sender has multicast so far: the UDP
// payload bytes of its data datagrams, and of those the bytes of chunks
// it had sent before (repairs, machines that asked after a chunk passed),
// from its /metrics; Refused the datagrams its socket refused (a local
// firewall dropping the group) and Requests the agents' requests.
type groupSent struct {
	Bytes, Again, Refused, Requests float64
	// MTFTPBytes and MTFTPCycles are the PXE MTFTP carousel's file bytes
	// sent to its group and its full cycles of a file.
	MTFTPBytes, MTFTPCycles float64
}

// scrapeGroup reads groupSent from the bootfleet server's /metrics; zero
// when the stack serves none.
func (b *bench) scrapeGroup(ctx context.Context) groupSent {
	out, err := harness.Output(ctx, "ip", "netns", "exec", nsClient,
		"curl", "-sf", "--max-time", "5", "http://"+serverIP+":8080/metrics")
	if err != nil {
		return groupSent{}
	}
	return parseGroupSent(out)
}

func parseGroupSent(metrics string) groupSent {
	var g groupSent
	for _, line := range strings.Split(metrics, "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "bootfleet_multicast_sent_bytes_total":
			g.Bytes = v
		case "bootfleet_multicast_again_bytes_total":
			g.Again = v
		case "bootfleet_multicast_send_errors_total":
			g.Refused = v
		case "bootfleet_multicast_requests_total":
			g.Requests = v
		case "bootfleet_mtftp_sent_bytes_total":
			g.MTFTPBytes = v
		case "bootfleet_mtftp_cycles_total":
			g.MTFTPCycles = v
		}
	}
	return g
}
