package transfer

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// writeReport saves results.json and the plots beside it, then the report.
func writeReport(r *Results, o *options, log *slog.Logger) error {
	if err := os.MkdirAll(o.plots, 0o755); err != nil {
		return err
	}
	if o.render == "" {
		if err := r.save(filepath.Join(o.plots, "results.json")); err != nil {
			return err
		}
	}
	rel, err := filepath.Rel(filepath.Dir(absPath(o.out)), absPath(o.plots))
	if err != nil {
		rel = o.plots
	}
	plots, err := writePlots(r, o.plots)
	if err != nil {
		log.Warn("plots not written", "err", err)
	}
	md := render(r, rel, plots)
	if old, err := os.ReadFile(o.out); err == nil {
		md = withABSection(md, abSection(string(old))) // the A/B mode's figures survive a full run
	}
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		return err
	}
	log.Info("report written", "path", o.out, "plots", o.plots)
	return nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// servers lists the server names that appear in measurements of case c, in
// the order of the servers table (bootfleet first).
func (r *Results) serversIn(c int) []string {
	var out []string
	for _, s := range r.Servers {
		for _, m := range r.Meas {
			if m.Case == c && m.Server == s.Name {
				out = append(out, s.Name)
				break
			}
		}
	}
	return out
}

// labelsIn lists the (topo, label) rows of case c in measurement order.
func (r *Results) labelsIn(c int) [][2]string {
	var out [][2]string
	seen := map[[2]string]bool{}
	for _, m := range r.Meas {
		k := [2]string{m.Topo, m.Label}
		if m.Case == c && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// cell is a figure in a table: median time and MB/s, its share of the
// limit, or why there is no figure.
func cell(m *Measurement) string {
	if m == nil {
		return "–"
	}
	if len(m.Runs) == 0 {
		return "not run (interrupted)"
	}
	if bad(m) {
		if m.Note != "" {
			return "**failed**: " + m.Note
		}
		return "**failed**: " + esc(m.Failures())
	}
	s := fmt.Sprintf("%.2f s, %.1f MB/s", m.Sec(), m.MBps())
	if !math.IsNaN(m.OfLimit()) {
		s += fmt.Sprintf(", %.0f%%", 100*m.OfLimit())
	}
	if m.SameAs != "" {
		s += " (=" + m.SameAs + ")"
	}
	if f := m.Failures(); f != "" {
		s += "; " + esc(f)
	}
	if m.Note != "" && m.SameAs == "" {
		s += "; " + esc(m.Note)
	}
	return s
}

// esc keeps table cells on one row.
func esc(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// vsPeer compares bootfleet's time with the best peer's for a row.
func (r *Results) vsPeer(c int, topo, label string) string {
	m, p := r.find(c, topo, label, "bootfleet"), r.bestPeer(c, topo, label)
	if bad(m) {
		return "–"
	}
	if p == nil {
		for _, o := range r.Meas {
			if o.Case == c && o.Topo == topo && o.Label == label && o.Server != "bootfleet" {
				return "every peer failed"
			}
		}
		return "–"
	}
	return fmt.Sprintf("%.2f× %s's time", m.Sec()/p.Sec(), p.Server)
}

func render(r *Results, plotDir string, plots map[string]string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	img := func(key, alt string) {
		if f, ok := plots[key]; ok {
			p("\n![%s](%s)\n", alt, filepath.ToSlash(filepath.Join(plotDir, f)))
		}
	}
	p("# TFTP and HTTP: bootfleet against dnsmasq, tftp-hpa, atftpd and nginx\n\n")
	p("Written by `make bench-transfer` (bench/transfer). Started %s, took %.0f min.", r.Started, r.Seconds/60)
	if !r.Complete {
		p(" **Incomplete run:** see Notes.")
	}
	p("\n\n")
	for _, h := range append(append([]string{}, r.Host...), r.Settings...) {
		p("- %s\n", h)
	}

	p("\n## Targets\n\nMedians; strict reading, no allowance for noise.\n\n| Target | Measured | Status |\n|---|---|---|\n")
	for _, t := range r.targets(r.Clients) {
		st := t.Status
		if st == "met" {
			st = "**met**"
		}
		p("| %s | %s | %s |\n", t.Name, esc(t.Measured), st)
	}

	r.renderMethod(&w)
	r.renderCase1(&w, img)
	r.renderCase2(&w)
	r.renderCase3(&w, img)
	r.renderSimple(&w, 4, "Case 4: loss (nftables, server to client)",
		"One "+r.sizeOf(4)+" transfer at blksize 1456 and windowsize 4 (servers that ignore windowsize run lockstep) over the shaped link, "+
			"with N% of the UDP packets from the server dropped on the client's ingress. The % is of the loss-free limit.\n")
	img("case4", "Case 4 throughput under loss")
	r.renderSimple(&w, 5, "Case 5: HTTP", "curl against bootfleet's /files/ and nginx's root; shaped link and loopback. "+
		"HTTP limit on the shaped link: full 1448-byte TCP segments (timestamps on) in 1538 wire bytes.\n")
	img("case5", "Case 5 HTTP throughput")
	r.renderCommands(&w)

	p("\n## Notes\n\n")
	for _, n := range r.observations() {
		p("- %s\n", esc(n))
	}
	for _, n := range r.Notes {
		p("- %s\n", esc(n))
	}
	return w.String()
}

// fastestSingle is the single-transfer measurement of case c with the
// highest MB/s.
func (r *Results) fastestSingle(c int) *Measurement {
	var best *Measurement
	for _, m := range r.Meas {
		if m.Case == c && m.Clients == 1 && !bad(m) && (best == nil || m.MBps() > best.MBps()) {
			best = m
		}
	}
	return best
}

func (r *Results) sizeOf(c int) string {
	for _, m := range r.Meas {
		if m.Case == c && m.Clients == 1 {
			return harness.MiB(m.Bytes)
		}
	}
	return "?"
}

func (r *Results) renderMethod(w *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	lim := tftpLimitSeconds(201<<20, mtuBlksize, linkMTU, r.RateBps)
	p("\n## Method\n\n")
	p("- **Link.** Two private network namespaces (%s, %s) joined by a veth pair, MTU %d, shaped with tbf on both ends:\n", nsServer, nsClient, linkMTU)
	for _, s := range r.Shaping {
		p("  `%s`\n", s)
	}
	p("  `overhead %d` makes tbf charge every frame its FCS, preamble and inter-frame gap (4+8+12 bytes) on top of the\n"+
		"  Ethernet header and IP packet it sees, so the shaped link carries exactly what real %s Ethernet carries.\n"+
		"  burst is half a millisecond of line rate; latency 10ms bounds the queue at about 1.25 MB (a switch port buffer).\n", harness.TBFOverhead, r.Rate)
	p("- **Physical limit.** A TFTP DATA packet of blksize 1456 costs 1456+4 (TFTP) +8 (UDP) +20 (IP) +14+4 (Ethernet) +8+12 (preamble, gap) = 1526\n"+
		"  bytes of wire time: %.1f MB/s of goodput at %s, so 201 MiB (210.8 MB) takes at least **%.3f s**. Without `overhead` tbf would\n"+
		"  count only 1502 bytes per packet and allow %.1f MB/s (%.3f s): an emulated link that is faster than a real one.\n"+
		"  Limits count the data direction only (ACKs use the other direction of a full-duplex link).\n",
		201*1048576/lim/1e6, r.Rate, lim, r.RateBps/8*1456/1502/1e6, 201*1048576/(r.RateBps/8*1456/1502))
	p("- **Loopback.** A third namespace (%s) with only `lo`: no shaping, CPU is the only limit.\n", nsLoopback)
	if best := r.fastestSingle(2); best != nil && r.RateBps < 10e9 {
		p("- **10 Gbit/s** is not run by default: on loopback, with no link at all, the fastest single TFTP transfer here was\n"+
			"  %.0f MB/s (%s), %.0f%% of the 1190 MB/s a 10 Gbit/s link carries at blksize 1456, so a 10 Gbit/s shaper would measure\n"+
			"  this machine's 2 cores, not the link. `-rate 10gbit` runs every case at 10 Gbit/s anyway.\n",
			best.MBps(), best.Server, 100*best.MBps()/1192.7)
	}
	p("- **Clients.** Debian's atftp for TFTP, curl for HTTP, started in the client namespace with `ip netns exec`. Each writes into a FIFO\n" +
		"  that bench reads and hashes with sha256; a download that is not byte-identical to the served file makes the run failed\n" +
		"  (no figure is taken from it). Times are wall-clock from starting the client to the last byte hashed, client start-up included.\n")
	p("- **Options.** Before measuring, bench asks each server for a small file with the figure's options (`atftp --trace`) and\n" +
		"  records its OACK (table below). When a server grants the same options as for a configuration already measured, it sends\n" +
		"  the same packets, so that figure is shown again, marked (=configuration), instead of re-running it.\n")
	p("- **CPU.** Server CPU is the usage_usec of a cgroup v2 leaf holding the server and all it forks, read before and after\n" +
		"  each run. Client CPU is the atftp/curl processes' rusage; hashing is bench's own. Busy is the whole machine's non-idle share.\n")
	p("- **Files** are random bytes on tmpfs, so neither disk nor compression plays a part.\n")
	p("\n### Servers\n\n| Server | Version | How it is run |\n|---|---|---|\n")
	for _, s := range r.Servers {
		v := s.Version
		if s.Skipped != "" {
			v = "not measured: " + s.Skipped
		}
		p("| %s | %s | %s |\n", s.Name, esc(v), esc(noteFor(s.Name)))
	}
	if len(r.Probes) > 0 {
		p("\n### Options granted (OACK)\n\n| Server | Requested | OACK |\n|---|---|---|\n")
		seen := map[string]bool{}
		for _, pr := range r.Probes {
			k := fmt.Sprintf("%s|%d|%d", pr.Server, pr.Blksize, pr.Windowsize)
			if seen[k] {
				continue
			}
			seen[k] = true
			req := fmt.Sprintf("blksize %d", pr.Blksize)
			if pr.Windowsize > 1 {
				req += fmt.Sprintf(", windowsize %d", pr.Windowsize)
			}
			got := pr.OACK
			if pr.Windowsize > 1 && pr.GotWindow == 0 {
				got += " (**ignores windowsize**: lockstep)"
			}
			if pr.GotBlksize > 1468 {
				got += " (above the MTU: IP fragments)"
			}
			p("| %s | %s | %s |\n", pr.Server, req, esc(got))
		}
	}
}

// noteFor is the spec note for a server, kept here too so -render works
// from results alone.
func noteFor(name string) string {
	for _, s := range specs(&options{}) {
		if s.name == name {
			return s.note
		}
	}
	return ""
}

func (r *Results) renderCase1(w *strings.Builder, img func(string, string)) {
	servers := r.serversIn(1)
	if len(servers) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## Case 1: one %s transfer at %s\n\n", r.sizeOf(1), r.Rate)
	p("Cells: median time, MB/s, and the share of the physical limit (100%% = the limit). Last column: bootfleet's time over the\nfastest peer's.\n\n")
	p("| Request | Limit | %s | bootfleet vs best peer |\n|---|---|%s---|\n", strings.Join(servers, " | "), strings.Repeat("---|", len(servers)))
	for _, row := range r.labelsIn(1) {
		lim := "–"
		for _, s := range servers {
			if m := r.find(1, row[0], row[1], s); m != nil && m.LimitSec > 0 {
				lim = fmt.Sprintf("%.2f s", m.LimitSec)
			}
		}
		p("| %s | %s |", row[1], lim)
		for _, s := range servers {
			p(" %s |", cell(r.find(1, row[0], row[1], s)))
		}
		p(" %s |\n", r.vsPeer(1, row[0], row[1]))
	}
	img("case1", "Case 1 throughput per server")
}

func (r *Results) renderCase2(w *strings.Builder) {
	servers := r.serversIn(2)
	if len(servers) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## Case 2: loopback, no shaping\n\nblksize 1456, windowsize 64 requested (servers grant what they support). One %s transfer, and %d clients\n"+
		"each fetching %s at once. CPU is server CPU seconds per GB (10^9 bytes) served.\n\n", r.sizeOf(2), r.Clients, r.concSize(2))
	p("| Run | %s | bootfleet vs best peer |\n|---|%s---|\n", strings.Join(servers, " | "), strings.Repeat("---|", len(servers)))
	for _, row := range r.labelsIn(2) {
		p("| %s |", row[1])
		for _, s := range servers {
			m := r.find(2, row[0], row[1], s)
			c := cell(m)
			if !bad(m) {
				c += fmt.Sprintf(", **%.2f CPU s/GB**", m.CPUPerGB())
			}
			p(" %s |", c)
		}
		p(" %s |\n", r.vsPeer(2, row[0], row[1]))
	}
	r.renderCPU(w, 2)
}

func (r *Results) concSize(c int) string {
	for _, m := range r.Meas {
		if m.Case == c && m.Clients > 1 {
			return harness.MiB(m.Bytes / int64(m.Clients))
		}
	}
	return "?"
}

// renderCPU shows where the CPU went in the multi-client runs of case c,
// which says whether the server or the clients set the figure.
func (r *Results) renderCPU(w *strings.Builder, c int) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\nWhere the CPU went (median run; the machine has 2 cores, so 2 s of CPU per wall second is everything; kernel = irq and\n" +
		"softirq time, mostly packet processing, which no process is charged for; other = the rest of the busy time: kernel\n" +
		"threads and any other work on the machine):\n\n")
	p("| Server | Run | Wall s | Server CPU s | Clients CPU s | bench hashing CPU s | Kernel CPU s | Other CPU s | Machine busy |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Meas {
		if m.Case != c || m.SameAs != "" || len(m.Runs) == 0 {
			continue
		}
		run := medianRun(m)
		irq := "–" // results from before the split have none
		if run.IRQCPU > 0 {
			irq = fmt.Sprintf("%.2f", run.IRQCPU)
		}
		p("| %s | %s %s | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.0f%% |\n", m.Server, m.Topo, m.Label, run.Sec, run.ServerCPU, run.ClientCPU, run.HashCPU, irq, run.OtherCPU, 100*run.Busy)
	}
}

// medianRun is the run whose time is the median (the lower one for even counts).
func medianRun(m *Measurement) Run {
	runs := append([]Run(nil), m.Runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].Sec < runs[j].Sec })
	return runs[(len(runs)-1)/2]
}

func (r *Results) renderCase3(w *strings.Builder, img func(string, string)) {
	if len(r.serversIn(3)) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## Case 3: boot storm at %s\n\n%d clients start at once; each fetches a 1 MiB NBP, then a %s kernel+initrd, blksize 1456.\n"+
		"Link share = the physical limit for all bytes over the time until the last client finished.\n\n", r.Rate, r.Clients, r.kernelSize())
	p("| Server | Mode | All done | Aggregate | Link share | p50 client | p99 client | Failed | Timed out |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Meas {
		if m.Case != 3 || len(m.Runs) == 0 {
			continue
		}
		run := medianRun(m)
		same := ""
		if m.SameAs != "" {
			same = " (=" + m.SameAs + ")"
		}
		p("| %s | %s%s | %.1f s | %.1f MB/s | %.0f%% | %.1f s | %.1f s | %d | %d |\n", m.Server, m.Label, same, run.Sec,
			float64(m.Bytes)/run.Sec/1e6, 100*m.LimitSec/run.Sec, harness.Percentile(run.PerClient, 50), harness.Percentile(run.PerClient, 99), run.Failed, run.TimedOut)
	}
	img("storm", "Case 3 per-client completion CDF")
	r.renderCPU(w, 3)
}

func (r *Results) kernelSize() string {
	for _, m := range r.Meas {
		if m.Case == 3 && m.Clients > 0 {
			return harness.MiB(m.Bytes/int64(m.Clients) - 1<<20)
		}
	}
	return "?"
}

// renderSimple is a table of rows × servers for cases 4 and 5.
func (r *Results) renderSimple(w *strings.Builder, c int, title, intro string) {
	servers := r.serversIn(c)
	if len(servers) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## %s\n\n%s\n", title, intro)
	p("| Link | Run | Limit | %s | bootfleet vs best peer |\n|---|---|---|%s---|\n", strings.Join(servers, " | "), strings.Repeat("---|", len(servers)))
	for _, row := range r.labelsIn(c) {
		lim := "–"
		for _, s := range servers {
			if m := r.find(c, row[0], row[1], s); m != nil && m.LimitSec > 0 {
				lim = fmt.Sprintf("%.2f s", m.LimitSec)
			}
		}
		p("| %s | %s | %s |", row[0], row[1], lim)
		for _, s := range servers {
			p(" %s |", cell(r.find(c, row[0], row[1], s)))
		}
		p(" %s |\n", r.vsPeer(c, row[0], row[1]))
	}
	if c == 5 {
		r.renderCPU(w, 5)
	}
}

func (r *Results) renderCommands(w *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## Commands behind each figure\n\nServers (the namespace decides the topology; bench waits until each answers):\n\n```\n")
	for _, s := range r.Servers {
		for _, c := range s.Cmds {
			p("%s\n", c)
		}
	}
	p("```\n\nCase 4 adds this ruleset in %s (N = 1 or 5):\n\n```\n%s```\n", nsClient, r.LossRule)
	p("\nClients, per figure (`-l`/`-o` name a FIFO that bench hashes; use a file to repeat by hand):\n\n")
	for c := 1; c <= 5; c++ {
		var lines []string
		seen := map[string]bool{}
		for _, m := range r.Meas {
			if m.Case != c || m.ClientCmd == "" || m.SameAs != "" {
				continue
			}
			l := fmt.Sprintf("# case %d, %s, %s, %s\n%s", c, m.Topo, m.Label, m.Server, m.ClientCmd)
			if m.Server != "nginx" && m.Server != "bootfleet" || c != 5 {
				l = fmt.Sprintf("# case %d, %s, %s (every server)\n%s", c, m.Topo, m.Label, m.ClientCmd)
			}
			if !seen[l] {
				seen[l] = true
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			p("```\n%s\n```\n", strings.Join(lines, "\n"))
		}
	}
}

// observations are conclusions drawn from the numbers themselves.
func (r *Results) observations() []string {
	var out []string
	if r.NumCPU > 0 {
		for c := 1; c <= 5; c++ {
			var other, capacity float64
			for _, m := range r.Meas {
				if m.Case != c || m.SameAs != "" {
					continue
				}
				for _, run := range m.Runs {
					other += run.OtherCPU
					capacity += run.Sec * float64(r.NumCPU)
				}
			}
			if capacity > 0 && other/capacity >= 0.1 {
				out = append(out, fmt.Sprintf("Case %d: %.0f%% of the machine's CPU during its runs was charged to neither the server, the clients nor bench. "+
					"Before the run other work kept %.0f%% of the CPU busy, so most of it is the kernel's own packet processing for both ends of the link "+
					"(softirq and kernel threads), which a real server does not share with its clients; the rest is other sessions' work on this shared machine.",
					c, 100*other/capacity, 100*r.OtherBefore))
			}
		}
	}
	// Lockstep is bound by the round trip, not the link: each block waits
	// for the client's ACK.
	var per []string
	for _, m := range r.Meas {
		if m.Case == 1 && m.Label == cfgLabel(mtuBlksize, 1) && !bad(m) {
			blocks := float64(m.Bytes/mtuBlksize + 1)
			per = append(per, fmt.Sprintf("%s %.1f µs", m.Server, m.Sec()/blocks*1e6))
		}
	}
	if len(per) > 0 && r.RateBps > 0 {
		out = append(out, fmt.Sprintf("Lockstep (case 1, windowsize 1) time per block: %s. Putting a block on the wire takes %.1f µs; "+
			"the rest is the round trip through both network stacks and atftp's turnaround before it ACKs, which a server can "+
			"shorten only by its own share of that loop.", strings.Join(per, ", "), float64(tftpBlockWire(mtuBlksize, linkMTU))*8/r.RateBps*1e6))
	}
	// Client-limited figures: the clients share the 2 cores with the server.
	for c := 1; c <= 5; c++ {
		var parts []string
		for _, m := range r.Meas {
			if m.Case != c || m.Clients <= 1 || m.SameAs != "" || len(m.Runs) == 0 {
				continue
			}
			run := medianRun(m)
			if run.Busy >= 0.85 && run.ClientCPU+run.HashCPU > run.ServerCPU {
				parts = append(parts, fmt.Sprintf("%s %s %s: clients %.1f CPU s vs server %.1f", m.Server, m.Topo, m.Label, run.ClientCPU+run.HashCPU, run.ServerCPU))
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("Case %d, many clients: the machine was saturated and the clients (atftp or curl processes plus bench's "+
				"sha256 of every byte) used more CPU than the server in: %s. These figures are set by the clients sharing 2 cores with the "+
				"server as much as by the server; with clients on other machines every server would go faster.", c, strings.Join(parts, "; ")))
		}
	}
	// Storm targets that the clients alone make impossible here.
	for _, m := range r.Meas {
		if m.Case != 3 || m.SameAs != "" || len(m.Runs) == 0 || r.NumCPU == 0 {
			continue
		}
		run := medianRun(m)
		budget := m.LimitSec / 0.9 * float64(r.NumCPU)
		if need := run.ClientCPU + run.HashCPU + run.IRQCPU + run.OtherCPU; m.LimitSec/run.Sec < 0.9 && need > budget {
			out = append(out, fmt.Sprintf("Case 3, %s %s: 90%% of the link means finishing in %.0f s, which is %.0f CPU s on %d cores; "+
				"the clients and bench's hashing (%.0f CPU s) and the kernel's packet processing for both ends (%.0f CPU s) alone used %.0f, "+
				"before the server's own %.0f. The target cannot be shown on this machine; it needs the clients on other hardware.",
				m.Server, m.Label, m.LimitSec/0.9, budget, r.NumCPU, run.ClientCPU+run.HashCPU, run.IRQCPU+run.OtherCPU, need, run.ServerCPU))
		}
	}
	return out
}
