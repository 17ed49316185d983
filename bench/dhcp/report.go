package dhcp

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// hostInfo is what a reader needs to judge the numbers.
type hostInfo struct {
	harness.Host
	WorkFS                string
	Versions              []string
	Postgres              string
	LoadBefore, LoadAfter string
	Elapsed               time.Duration
	Topology              []string // the commands that built the namespaces
}

func describeHost(ctx context.Context, o options, work string) *hostInfo {
	h := &hostInfo{Host: harness.DescribeHost(ctx), WorkFS: harness.FSType(work)}
	h.Versions = []string{
		"bootfleet: " + h.Version + " (git describe of the tree)",
		"kea-dhcp4: " + harness.FirstLine(ctx, o.kea, "-v"),
		"perfdhcp: " + harness.FirstLine(ctx, o.perfdhcp, "-v"),
		"dnsmasq: " + harness.FirstLine(ctx, o.dnsmasq, "--version"),
	}
	return h
}

// summary is the median over the runs of one server at one rate.
type summary struct {
	ok                         int
	rate, lo, hi, drop         float64
	acked, sent                float64
	doP50, doP99, raP50, raP99 float64
	failures                   []string
}

func summarize(ms []Measurement, server string, rate int) summary {
	var s summary
	var rates, drops, acked, sent, d50, d99, r50, r99 []float64
	for _, m := range ms {
		if m.Server != server || m.Rate != rate {
			continue
		}
		if m.Err != nil {
			s.failures = append(s.failures, fmt.Sprintf("run %d: %v", m.Run, firstLine(m.Err.Error())))
			continue
		}
		r := m.Result
		s.ok++
		rates = append(rates, r.Rate)
		drops = append(drops, r.DropPct())
		acked = append(acked, float64(r.RA.Received))
		sent = append(sent, float64(r.DO.Sent))
		d50 = append(d50, harness.Percentile(r.DO.Latencies, 50))
		d99 = append(d99, harness.Percentile(r.DO.Latencies, 99))
		r50 = append(r50, harness.Percentile(r.RA.Latencies, 50))
		r99 = append(r99, harness.Percentile(r.RA.Latencies, 99))
	}
	s.rate, s.drop, s.acked, s.sent = harness.Median(rates), harness.Median(drops), harness.Median(acked), harness.Median(sent)
	s.doP50, s.doP99, s.raP50, s.raP99 = harness.Median(d50), harness.Median(d99), harness.Median(r50), harness.Median(r99)
	s.lo, s.hi = math.NaN(), math.NaN()
	for _, v := range rates {
		if math.IsNaN(s.lo) || v < s.lo {
			s.lo = v
		}
		if math.IsNaN(s.hi) || v > s.hi {
			s.hi = v
		}
	}
	return s
}

func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }

func ms(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func writeReport(o options, h *hostInfo, ts []*target, all []Measurement) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# DHCP benchmark: full DORA exchanges with perfdhcp\n\n")
	w("Written by `make bench-dhcp` (bench/dhcp) on %s; the whole run took %v.\n", h.Date, h.Elapsed)
	w("Each server starts from an empty lease store for every run; perfdhcp offers the same rate for %v from %d distinct MACs\n", o.duration, o.clients)
	w("(random, same seed per run number for every server). Numbers are the median of %d runs; runs of the servers are interleaved.\n\n", o.runs)

	w("## Target: at least Kea memfile's rate, with leases durable\n\n")
	for _, rate := range o.rates {
		bf, k := summarize(all, "bootfleet (SQLite)", rate), summarize(all, "Kea kea-dhcp4 (memfile)", rate)
		if bf.ok == 0 || k.ok == 0 {
			w("- offered %d/s: not measured (a server failed; see below)\n", rate)
			continue
		}
		verdict := "**not met**"
		switch {
		case bf.rate >= 0.98*float64(rate) && k.rate >= 0.98*float64(rate):
			verdict = "both keep up with the offered rate (no capacity difference visible at this rate)"
		case bf.rate >= k.rate:
			verdict = "**met**"
		}
		w("- offered %d/s: bootfleet (SQLite) %.0f DORA/s vs Kea memfile %.0f DORA/s (%.0f%%): %s\n", rate, bf.rate, k.rate, 100*bf.rate/k.rate, verdict)
	}
	w("\nbootfleet's leases are durable (committed and fsynced before the ACK); Kea memfile's are written but not fsynced.\n\n")

	w("## Results\n\n")
	w("DORA/s is perfdhcp's completed 4-way exchanges per second. Drops: DISCOVERs that did not end in an ACK\n")
	w("(perfdhcp waits 1 s per packet). Latencies in ms, per packet: DO = DISCOVER to OFFER, RA = REQUEST to ACK (the lease write).\n\n")
	for _, rate := range o.rates {
		w("### Offered %d DORA/s\n\n", rate)
		w("| Server | DORA/s (median) | min – max | ACKs / DISCOVERs | drops | DO p50 | DO p99 | RA p50 | RA p99 |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, t := range ts {
			s := summarize(all, t.Name, rate)
			if s.ok == 0 {
				w("| %s | failed | | | | | | | |\n", t.Name)
				continue
			}
			w("| %s | %.0f | %.0f – %.0f | %.0f / %.0f | %.1f%% | %s | %s | %s | %s |\n", t.Name, s.rate, s.lo, s.hi,
				s.acked, s.sent, s.drop, ms(s.doP50), ms(s.doP99), ms(s.raP50), ms(s.raP99))
		}
		for _, t := range ts {
			for _, f := range summarize(all, t.Name, rate).failures {
				w("\n- %s %s", t.Name, f)
			}
		}
		w("\n")
	}

	w("## What a written lease means\n\n")
	for _, t := range ts {
		w("- %s: %s.\n", t.Name, t.Durability)
	}
	if h.Postgres != "" {
		w("- PostgreSQL (scripts/pg-test.sh, restarted by the bench without its fsync=off): %s.\n", h.Postgres)
	}
	w("\nLease stores live in the run directory under `%s`: %s. Per-packet logging is off for every server\n", o.work, h.WorkFS)
	w("(bootfleet log.level warn, Kea WARN, dnsmasq --quiet-dhcp). dnsmasq runs with --no-ping (no ICMP probe before an offer,\n")
	w("as the others). Kea runs with its default threading (2.2: single-threaded).\n\n")

	w("## Machine\n\n")
	w("- %d CPUs, %s; kernel %s\n", h.CPUs, h.CPU, h.Kernel)
	w("- load average before / after: %s / %s (the machine is shared; compare servers within one run, not across reports)\n", h.LoadBefore, h.LoadAfter)
	for _, v := range h.Versions {
		w("- %s\n", v)
	}

	w("\n## Exact commands\n\n```sh\n# as root, from the repository root:\nmake bench-dhcp ARGS='-rates %s -duration %v -runs %d -clients %d'\n\n", joinInts(o.rates), o.duration, o.runs, o.clients)
	w("# topology\n")
	for _, c := range h.Topology {
		w("%s\n", c)
	}
	w("\n# servers (DIR is a fresh directory per run), each run in the server namespace: ip netns exec %s ...\n", nsServer)
	for _, t := range ts {
		w("%s\n", t.Command)
	}
	w("\n# client, in the client namespace; RATE from -rates, SEED = run number\n")
	w("ip netns exec %s %s\n```\n\n", nsClient, perfdhcpTemplate(o))
	w("bootfleet config (DIR/bootfleet.yaml):\n\n```yaml\n%s```\n\n", bootfleetConfigText("DIR"))
	w("Kea config (DIR/kea-dhcp4.json):\n\n```json\n%s```\n\n", fmt.Sprintf(keaConfig, vethServer, "DIR/kea-leases4.csv", "10.216.0.0", prefixLen, poolFirst, poolLast))

	w("## All runs\n\n| Offered | Run | Server | DORA/s | ACKs | DISCOVERs | drops |\n|---:|---:|---|---:|---:|---:|---:|\n")
	for _, m := range all {
		if m.Err != nil {
			w("| %d | %d | %s | failed | | | |\n", m.Rate, m.Run, m.Server)
			continue
		}
		w("| %d | %d | %s | %.1f | %d | %d | %.1f%% |\n", m.Rate, m.Run, m.Server, m.Result.Rate, m.Result.RA.Received, m.Result.DO.Sent, m.Result.DropPct())
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

func perfdhcpTemplate(o options) string {
	args := perfdhcpArgs(o, 0, 0)
	for i := 1; i < len(args); i++ {
		switch args[i-1] {
		case "-r":
			args[i] = "RATE"
		case "-s":
			args[i] = "SEED"
		}
	}
	return strings.Join(args, " ")
}

// bootfleetConfigText is the config every bootfleet run gets: DHCP only,
// full mode over the bench pool, 1 h leases, TFTP off, warn-level logs (no
// log line per packet, as for the peers).
func bootfleetConfigText(dir string) string {
	return fmt.Sprintf(`interface: %s
server_ip: %s
data: %s/data
dhcp: {mode: full, range: %s-%s, lease: 1h}
tftp: {listen: "off"}
http: {listen: "127.0.0.1:8080"}
ipxe: {dir: %s/ipxe}   # placeholder ipxe.efi and undionly.kpxe
log: {level: warn}
`, vethServer, serverAddr, dir, poolFirst, poolLast, dir)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
