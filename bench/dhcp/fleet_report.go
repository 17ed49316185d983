package dhcp

import (
	"fmt"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

type fleetReport struct {
	o                     options
	host                  harness.Host
	pg                    string
	topo                  []string
	ms                    []fleetMeasurement
	loadBefore, loadAfter string
	elapsed               time.Duration
}

func (r fleetReport) label(n int) string {
	if n == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", n)
}

// plain is the measurements as the DHCP bench's, for summarize.
func (r fleetReport) plain() []Measurement {
	var out []Measurement
	for _, m := range r.ms {
		out = append(out, m.Measurement)
	}
	return out
}

func (r fleetReport) cpu(n, rate int) float64 {
	var xs []float64
	for _, m := range r.ms {
		if m.Servers == n && m.Rate == rate && m.Err == nil {
			xs = append(xs, m.ServerCPU)
		}
	}
	return harness.Median(xs)
}

func (r fleetReport) render() string {
	o := r.o
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# DHCP across a fleet: one server against three on one PostgreSQL\n\n")
	w("Written by `make bench-dhcp-fleet` (bench/dhcp, FleetMain) on %s; the whole run took %v.\n", r.host.Date, r.elapsed)
	w("perfdhcp broadcasts DORA exchanges on one LAN (a bridge) from %d distinct MACs for %v per run; every server\n", o.clients, o.duration)
	w("on the LAN sees every packet and RFC 3074 load balancing picks the one that answers. The fleet shares one\n")
	w("PostgreSQL (fsync on) on the first server's host; every run starts from an empty database. Medians of %d runs,\n", o.runs)
	w("fleet sizes interleaved. After each run the lease table is checked: no address may be leased twice.\n\n")

	all := r.plain()
	w("## Three servers against one\n\n")
	for _, rate := range o.rates {
		one, three := summarize(all, "1 server(s)", rate), summarize(all, fmt.Sprintf("%d server(s)", fleetServers), rate)
		if one.ok == 0 || three.ok == 0 {
			w("- offered %d/s: not measured (a run failed; see below)\n", rate)
			continue
		}
		verdict := "the runs' ranges overlap: no difference shown"
		if three.lo > one.hi || three.hi < one.lo {
			verdict = "the runs' ranges do not overlap"
		}
		w("- offered %d/s: %d servers %.0f DORA/s against 1 server %.0f DORA/s (%.0f%%; %s); server CPU %.1f s against %.1f s per run\n",
			rate, fleetServers, three.rate, one.rate, 100*three.rate/one.rate, verdict, r.cpu(fleetServers, rate), r.cpu(1, rate))
	}
	w("\nOn this machine (%d CPUs) three servers, PostgreSQL and perfdhcp share the same cores, so a fleet cannot be\n", r.host.CPUs)
	w("faster here than one server: every server still receives and decodes every broadcast, and each exchange\n")
	w("costs one PostgreSQL commit wherever it is answered. What the table shows is the price of the fleet's\n")
	w("coordination (the bucket decision, the shared lease table and its unique constraint) at the same offered\n")
	w("rate; on separate machines each server would carry a third of the commits on its own CPU.\n\n")

	w("## Results\n\n")
	for _, rate := range o.rates {
		w("### Offered %d DORA/s\n\n", rate)
		w("| Fleet | DORA/s (median) | min – max | ACKs / DISCOVERs | drops | DO p50 | DO p99 | RA p50 | RA p99 | server CPU s |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range []int{1, fleetServers} {
			s := summarize(all, fmt.Sprintf("%d server(s)", n), rate)
			if s.ok == 0 {
				w("| %s | failed | | | | | | | | |\n", r.label(n))
				continue
			}
			w("| %s | %.0f | %.0f – %.0f | %.0f / %.0f | %.1f%% | %s | %s | %s | %s | %.1f |\n", r.label(n), s.rate, s.lo, s.hi,
				s.acked, s.sent, s.drop, ms(s.doP50), ms(s.doP99), ms(s.raP50), ms(s.raP99), r.cpu(n, rate))
		}
		for _, n := range []int{1, fleetServers} {
			for _, f := range summarize(all, fmt.Sprintf("%d server(s)", n), rate).failures {
				w("\n- %s %s", r.label(n), f)
			}
		}
		w("\n")
	}

	w("## Machine\n\n")
	w("- %d CPUs, %s; kernel %s\n", r.host.CPUs, r.host.CPU, r.host.Kernel)
	w("- load average before / after: %s / %s (the machine is shared; compare within one run)\n", r.loadBefore, r.loadAfter)
	w("- bootfleet %s; PostgreSQL: %s\n", r.host.Version, r.pg)

	w("\n## Exact commands\n\n```sh\n# as root, from the repository root:\nmake bench-dhcp-fleet ARGS='-rates %s -duration %v -runs %d -clients %d'\n\n", joinInts(o.rates), o.duration, o.runs, o.clients)
	w("# the LAN\n")
	for _, c := range r.topo {
		w("%s\n", c)
	}
	w("\n# server I of N (1..N), in its namespace; DSN names a fresh database on %s\n", fleetServerIP(1))
	w("ip netns exec bf-dflt-sI %s serve --config DIR/fleet.yaml --store DSN\n", o.bootfleet)
	w("\n# client; RATE from -rates, SEED = run number\n")
	w("ip netns exec %s %s\n```\n\n", fleetClientNS, strings.Join(fleetPerfdhcpArgs(o, 0, 0), " "))
	w("Server 1's config (DIR/fleet.yaml; the others differ in name and address):\n\n```yaml\n%s```\n\n", fleetConfigText("DIR", 1))

	w("## All runs\n\n| Offered | Run | Fleet | DORA/s | ACKs | DISCOVERs | drops | leases (distinct addresses) | ready after |\n")
	w("|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.ms {
		if m.Err != nil {
			w("| %d | %d | %s | failed: %s | | | | | |\n", m.Rate, m.Run, r.label(m.Servers), strings.ReplaceAll(firstLine(m.Err.Error()), "|", "/"))
			continue
		}
		w("| %d | %d | %s | %.1f | %d | %d | %.1f%% | %d (%d) | %v |\n", m.Rate, m.Run, r.label(m.Servers), m.Result.Rate,
			m.Result.RA.Received, m.Result.DO.Sent, m.Result.DropPct(), m.Leases, m.IPs, m.ReadyAfter)
	}
	return b.String()
}
