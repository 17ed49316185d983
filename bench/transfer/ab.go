package transfer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// The A/B mode tries a change to the lockstep path (windowsize 1, blksize
// 1456: what BIOS PXE ROMs and many UEFI NIC drivers ask for) before the
// whole bench: several bootfleet builds and the lockstep peers each serve
// one big file over the shaped link, in rounds that start with a different
// server each time. Lockstep time is one round trip per block, so a few
// microseconds of turnaround are the whole difference; only a round-by-round
// sign test can tell them apart on a shared machine. Server CPU per block
// (the cgroup's usage) moves less with other work on the machine than wall
// time does, so it is printed beside it.

type abOptions struct {
	rounds   int
	sizeMiB  int
	trace    bool
	report   string
	peers    []string
	variants []abVariant
}

// abVariant is one bootfleet binary under test.
type abVariant struct{ name, bin string }

func parseABFlags(args []string) (abOptions, error) {
	var o abOptions
	fs := flag.NewFlagSet("transfer ab", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bench transfer ab [flags] NAME=BINARY ...\n  e.g. bench transfer ab head=/tmp/head/bootfleet new=bin/bootfleet")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.rounds, "rounds", 7, "rounds; each runs every server once (7 wins of 7 is sign test p = 0.016)")
	fs.IntVar(&o.sizeMiB, "size-mib", 201, "file size in MiB (201 is case 1's)")
	fs.BoolVar(&o.trace, "trace", false, "then trace one more transfer per server with perf (raw_syscalls) and print where each block's microseconds go")
	fs.StringVar(&o.report, "report", "", "also write the results as the A/B section of this report (BENCHMARKS-transfer.md), replacing the one there")
	peers := fs.String("peers", "atftpd,dnsmasq", "peers measured in the same rounds (empty for none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.rounds < 1 || o.sizeMiB < 1 {
		return o, errors.New("-rounds and -size-mib must be at least 1")
	}
	for _, p := range strings.Split(*peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.peers = append(o.peers, p)
		}
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return o, errors.New("want at least one NAME=BINARY")
	}
	for _, a := range fs.Args() {
		name, bin, ok := strings.Cut(a, "=")
		if !ok || name == "" || bin == "" || strings.ContainsAny(name, "/ ") {
			return o, fmt.Errorf("variant %q: want NAME=BINARY, e.g. head=/tmp/head/bootfleet", a)
		}
		if slices.Contains(o.peers, name) || slices.ContainsFunc(o.variants, func(v abVariant) bool { return v.name == name }) {
			return o, fmt.Errorf("variant name %q is taken; give each variant its own name", name)
		}
		if st, err := os.Stat(bin); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return o, fmt.Errorf("%s (variant %s) is not an executable", bin, name)
		}
		o.variants = append(o.variants, abVariant{name, bin})
	}
	return o, nil
}

// abMain runs the A/B rounds and prints the summary to stdout.
func abMain(ctx context.Context, log *slog.Logger, args []string) error {
	ab, err := parseABFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root for network namespaces and tc")
	}
	if _, err := exec.LookPath("perf"); ab.trace && err != nil {
		return errors.New("-trace needs perf: apt-get install linux-perf")
	}
	o, err := parseFlags([]string{"-servers", strings.Join(ab.peers, ",")})
	if err != nil {
		return err
	}
	// Only the big file matters; the others stay small so setup is quick.
	const MiB = 1 << 20
	o.bigSize, o.nbpSize, o.kernelSize, o.concSize, o.lossSize = int64(ab.sizeMiB)*MiB, 64<<10, 64<<10, 64<<10, 64<<10

	lock, err := harness.Lock("/run/bf-bench.lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	harness.DeleteNamespaces(nsServer, nsClient, nsLoopback)
	b := &bench{opt: o, log: log, work: o.work, res: &Results{}}
	if err := b.setup(ctx); err != nil {
		b.teardown()
		return err
	}
	defer b.teardown()
	// Variants first, so the first variant is the base of every comparison.
	peers := b.specs
	b.specs = nil
	for _, v := range ab.variants {
		spec := *specs(o)[0]
		spec.name, spec.bin = v.name, v.bin
		spec.argv = func(b *bench, t *harness.Net, dir string) ([]string, error) {
			a, err := bootfleetArgv(b, t, dir)
			if err == nil {
				a[0] = v.bin
			}
			return a, err
		}
		b.specs = append(b.specs, &spec)
	}
	b.specs = append(b.specs, peers...)

	var text strings.Builder
	out := io.MultiWriter(os.Stdout, &text)
	big := b.files["big.img"]
	limit := tftpLimitSeconds(big.Size, mtuBlksize, linkMTU, o.rateBps)
	// Lockstep on a loaded 2-core machine has taken 15× the link limit.
	deadline := max(60*time.Second, time.Duration(40*limit*float64(time.Second)))
	steps := b.tftpSteps(b.shaped, mtuBlksize, 1, big.Name)
	fmt.Fprintf(out, "client, each run: %s\nlink limit: %.3f s for %s at blksize %d\n", clientCmd(steps, 1), limit, harness.MiB(big.Size), mtuBlksize)
	blocks := float64(big.Size/mtuBlksize + 1)
	wakes := map[string][]float64{} // server thread wakeups per block, by round
	var order []string
	for _, s := range b.specs {
		order = append(order, s.name)
	}
	for r := 0; r < ab.rounds && ctx.Err() == nil; r++ {
		var line []string
		for _, spec := range harness.Rotate(b.specs, r) {
			m := b.figure(1, "shaped", "lockstep", spec.name, 1, big.Size, limit)
			n0 := len(m.Runs)
			w := math.NaN()
			b.withServer(ctx, 1, spec, b.shaped, false, func(s *server) {
				// -rounds bounds the A/B, not the per-figure budget, and a
				// run past the deadline fails that round only.
				m.spent, m.done = 0, false
				runs0 := harness.SchedRuns(s.Pid())
				b.measureOnce(ctx, m, s, ab.rounds, steps, deadline)
				w = float64(harness.SchedRuns(s.Pid())-runs0) / blocks
			})
			if len(m.Runs) == n0 { // the server did not start: a failed run keeps the rounds paired
				m.Runs = append(m.Runs, Run{Sec: math.NaN()})
			}
			last := m.Runs[len(m.Runs)-1]
			if !last.OK || w < 0.05 {
				// Under 0.05: the transfer's threads exited before they
				// could be read (atftpd), so they were not counted.
				w = math.NaN()
			}
			wakes[spec.name] = append(wakes[spec.name], w)
			line = append(line, fmt.Sprintf("%s %.3f s", spec.name, last.Sec))
		}
		fmt.Fprintf(out, "== round %d/%d: %s\n", r+1, ab.rounds, strings.Join(line, "  "))
	}
	for _, n := range b.res.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	byServer := map[string][]Run{}
	for _, m := range b.res.Meas {
		byServer[m.Server] = m.Runs
	}
	writeABSummary(out, order, len(ab.variants), byServer, wakes, big.Size, limit)
	if ab.trace {
		fmt.Fprintln(out, "\nsystem calls of one more transfer per server, traced with perf record -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -p PID:")
		for _, spec := range b.specs {
			b.withServer(ctx, 1, spec, b.shaped, false, func(s *server) {
				if err := b.traceRun(ctx, s, steps, out); err != nil {
					fmt.Fprintf(out, "%-10s trace failed: %v\n", spec.name, err)
				}
			})
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ab.report != "" {
		return writeABReport(ab.report, "bin/bench transfer ab "+harness.ShellJoin(args), text.String())
	}
	return nil
}

// writeABSummary prints each server's medians, then each of the first
// variants servers (the bootfleet builds) against every other, round by
// round. Failed runs count as NaN and drop out of the comparison. Wakeups
// are left out where they were not counted: atftpd's transfer threads exit
// before they can be read.
func writeABSummary(w io.Writer, order []string, variants int, runs map[string][]Run, wakes map[string][]float64, size int64, limit float64) {
	blocks := float64(size/mtuBlksize + 1)
	// perRun is f of each of name's runs in round order, NaN for a failed one.
	perRun := func(name string, f func(Run) float64) []float64 {
		var xs []float64
		for _, r := range runs[name] {
			if r.OK {
				xs = append(xs, f(r))
			} else {
				xs = append(xs, math.NaN())
			}
		}
		return xs
	}
	secs := func(name string) []float64 { return perRun(name, func(r Run) float64 { return r.Sec }) }
	cpus := func(name string) []float64 {
		return perRun(name, func(r Run) float64 { return r.ServerCPU / blocks * 1e6 })
	}
	ok := func(xs []float64) []float64 {
		return slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	}
	fmt.Fprintf(w, "\n%-10s %8s %9s %8s %12s %14s %14s  runs (s)\n", "server", "median s", "MB/s", "of link", "µs/block", "CPU µs/block", "wakeups/block")
	for _, n := range order {
		s := ok(secs(n))
		if len(s) == 0 {
			fmt.Fprintf(w, "%-10s no successful run\n", n)
			continue
		}
		med := harness.Median(s)
		var rs []string
		for _, x := range secs(n) {
			rs = append(rs, fmt.Sprintf("%.3f", x))
		}
		wk := "–"
		if k := harness.Median(ok(wakes[n])); k > 0 {
			wk = fmt.Sprintf("%.2f", k)
		}
		fmt.Fprintf(w, "%-10s %8.3f %9.1f %7.0f%% %12.2f %14.2f %14s  %s\n", n, med, float64(size)/med/1e6, 100*limit/med,
			med/blocks*1e6, harness.Median(ok(cpus(n))), wk, strings.Join(rs, " "))
	}
	pairs := func(xs, ys []float64) [][2]float64 {
		var ps [][2]float64
		for i := range min(len(xs), len(ys)) {
			ps = append(ps, [2]float64{xs[i], ys[i]})
		}
		return ps
	}
	fmt.Fprintf(w, "\nround by round, each bootfleet build against every other server (ratio > 1: the build was slower, used more CPU or woke more):\n")
	for i, n := range order[:variants] {
		for _, m := range order {
			if m == n || slices.Index(order, m) < i && slices.Index(order, m) < variants {
				continue
			}
			t := harness.Compare(pairs(secs(n), secs(m)))
			c := harness.Compare(pairs(cpus(n), cpus(m)))
			line := fmt.Sprintf("%-8s vs %-8s time %.3f×, slower in %d of %d (sign test p = %.3f); server CPU %.3f×, more in %d of %d (p = %.3f)",
				n, m, t.Ratio, t.Wins, t.N, t.P, c.Ratio, c.Wins, c.N, c.P)
			if k := harness.Compare(pairs(wakes[n], wakes[m])); k.N > 0 && !math.IsNaN(k.Ratio) && k.Ratio > 0 {
				line += fmt.Sprintf("; wakeups %.3f×, more in %d of %d (p = %.3f)", k.Ratio, k.Wins, k.N, k.P)
			}
			fmt.Fprintln(w, line)
		}
	}
}

// The A/B section of BENCHMARKS-transfer.md lies between these markers:
// `bench transfer ab -report` replaces it, and a full run keeps it.
const (
	abBegin = "<!-- written by bench transfer ab: begin -->"
	abEnd   = "<!-- written by bench transfer ab: end -->"
)

// abSection is md's A/B section, markers included, or "" when it has none.
func abSection(md string) string { return harness.Section(md, abBegin, abEnd) }

// withABSection is md with its A/B section replaced by sec, or with sec
// appended when it has none; an empty sec changes nothing.
func withABSection(md, sec string) string { return harness.WithSection(md, abBegin, abEnd, sec) }

// writeABReport puts the A/B output into the report at path.
func writeABReport(path, cmd, out string) error {
	md, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-report: %w", err)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "%s\n## Lockstep A/B: bootfleet builds against atftpd and dnsmasq\n\n", abBegin)
	fmt.Fprintf(&w, "Written by `%s` on %s (kept by full runs). ", cmd, time.Now().UTC().Format(time.RFC3339))
	w.WriteString("Each round serves one file lockstep (blksize 1456, no windowsize: a BIOS PXE ROM) from each server in turn over " +
		"the shaped link, starting with a different server each round; each build is compared with every other server round by " +
		"round, with a sign test. Lockstep time is one round trip per block: the server's turnaround, the wire, the client's. " +
		"Server CPU per block is the cgroup's usage; wakeups per block are the times a server thread was put on a CPU " +
		"(schedstat), which on this virtual machine cost more than the system calls between them. " +
		"The traced transfers show the server's side of one block: the turnaround from the end of the call that waited for " +
		"the ACK to the start of the DATA send, the send call itself, and the calls made per block.\n\n")
	fmt.Fprintf(&w, "- host: %s\n- load average at the end: %s\n\n```\n%s```\n%s", harness.CPUModel(), harness.LoadAvg(), out, abEnd)
	return os.WriteFile(path, []byte(withABSection(string(md), w.String())), 0o644)
}
