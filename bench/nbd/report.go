package nbd

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// report is everything the report says: the options, the machine, the
// servers and the runs. render turns it into markdown without touching the
// machine, so that tests can render fixed results.
type report struct {
	o             options
	host          harness.Host
	written       time.Time
	elapsed       time.Duration
	loadAfter     string
	tools         string // the versions of the peers and clients
	dev, fstype   string // the disk under /var/tmp
	dirty         [2]string
	pageReporting bool   // the VM hands freed memory back to its host
	work          string // the tmpfs directory, shown as $WORK
	res           results
	uris          map[string]string
	multi         map[string]string
	srvCmds       map[string]string
}

// report gathers what render needs from the bed and the machine.
func (b *bed) report(ctx context.Context, host harness.Host, elapsed time.Duration) report {
	rep := report{o: b.o, host: host, written: time.Now(), elapsed: elapsed, loadAfter: harness.LoadAvg(),
		dev: b.dev, fstype: b.fstype, work: b.work, res: b.res, multi: b.multi, srvCmds: b.srvCmds, uris: map[string]string{}}
	for k, s := range b.servers {
		rep.uris[k] = s.uri
	}
	nbds := "unknown"
	out, _ := exec.CommandContext(ctx, "nbd-server", "-V").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); strings.Contains(l, "version") && len(f) > 0 {
			nbds = f[len(f)-1]
			break
		}
	}
	rep.tools = fmt.Sprintf("%s; %s; nbd-server %s; %s; %s", harness.FirstLine(ctx, "qemu-nbd", "--version"),
		harness.FirstLine(ctx, "nbdkit", "--version"), nbds, harness.FirstLine(ctx, "fio", "--version"), harness.FirstLine(ctx, "nbdcopy", "--version"))
	for i, f := range []string{"dirty_background_ratio", "dirty_ratio"} {
		rep.dirty[i] = "?"
		if v, err := os.ReadFile("/proc/sys/vm/" + f); err == nil {
			rep.dirty[i] = strings.TrimSpace(string(v))
		}
	}
	_, err := os.Stat("/sys/module/page_reporting/parameters/page_reporting_order")
	rep.pageReporting = err == nil
	return rep
}

func show(v float64, unit string) string {
	if math.IsNaN(v) {
		return "failed"
	}
	if unit == "MB/s" {
		return fmt.Sprintf("%.0f MB/s", v)
	}
	return fmt.Sprintf("%.0f IOPS", v)
}

// perUnit renders CPU seconds per unit of work: seconds per GB moved, or
// microseconds per 4 KiB operation, a fio run's operations being its IOPS
// over the measured seconds plus the 1 s ramp, which its CPU time covers
// too. For the client, fio's share of one CPU as well: fio is one thread,
// so near 100% the client, not the server, is the limit.
func (rep report) perUnit(cpu, m float64, unit string, client bool) string {
	if math.IsNaN(cpu) || math.IsNaN(m) {
		return "-"
	}
	if unit == "MB/s" {
		return fmt.Sprintf("%.2f s/GB", cpu/(imgBytes/1e9))
	}
	secs := float64(rep.o.runtime + 1)
	s := fmt.Sprintf("%.1f us/op", cpu*1e6/(m*secs))
	if client {
		s += fmt.Sprintf(", %.0f%% of a CPU", cpu/secs*100)
	}
	return s
}

func vsBest(m, best float64) string {
	if math.IsNaN(m) || best == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", m/best*100)
}

// table is one case: server, median, the ceiling beside it, share of the
// best peer, server and client CPU per unit of work, the runs, the exact
// command.
func (rep report) table(w *strings.Builder, c, unit, ceilKey string, keys []string) {
	r := rep.res
	best, _ := r.bestPeer(c, keys)
	base, _, _ := strings.Cut(c, "-") // rr-ovl and rwd-read share the ceilings of rr and rwd
	ceil := show(r.median(base, ceilKey, value), unit)
	w.WriteString("| server | median | ceiling (no NBD) | vs best peer | server CPU | client CPU | runs | command |\n")
	w.WriteString("|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, k := range keys {
		m := r.median(c, k, value)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | `%s` |\n", names[k], show(m, unit), ceil, vsBest(m, best),
			rep.perUnit(r.median(c, k, serverCPU), m, unit, false), rep.perUnit(r.median(c, k, clientCPU), m, unit, true),
			r.runs(c, k), r.cmds[c+"/"+k])
	}
}

// verdict is one line per bootfleet row against the best peer.
func (rep report) verdict(w *strings.Builder, c, unit string, keys []string) {
	r := rep.res
	best, peer := r.bestPeer(c, keys)
	for _, k := range keys {
		if !isBootfleet(k) {
			continue
		}
		m := r.median(c, k, value)
		switch {
		case math.IsNaN(m):
			fmt.Fprintf(w, "- %s: failed.\n", names[k])
			continue
		case peer == "":
			fmt.Fprintf(w, "- %s: %s; every peer failed.\n", names[k], show(m, unit))
			continue
		}
		d, ahead := (m/best-1)*100, "**ahead**"
		if d < 0 {
			d, ahead = -d, "**behind**"
		}
		fmt.Fprintf(w, "- %s: %s against %s (%s): %s by %.0f%%", names[k], show(m, unit), names[peer], show(best, unit), ahead, d)
		if v := r.versus(c, k, peer); v.N > 0 {
			fmt.Fprintf(w, "; round by round, the median ratio is %.0f%%; ahead in %d of %d paired runs", v.Ratio*100, v.Wins, v.N)
			if v.P >= 0.05 {
				fmt.Fprintf(w, " (sign test p = %.2f: not told apart from a tie)", v.P)
			} else {
				fmt.Fprintf(w, " (sign test p = %.3f)", v.P)
			}
		}
		w.WriteString(".\n")
	}
}

func (rep report) readersTable(w *strings.Builder) {
	r := rep.res
	w.WriteString("| readers | server | aggregate | ceiling (no NBD) | vs best peer | read from disk | server CPU | client CPU | runs |\n")
	w.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, n := range readerCounts {
		c := fmt.Sprintf("readers%d", n)
		best, _ := r.bestPeer(c, smallKeys)
		ceil := show(r.median(c, "ceil-sm", value), "MB/s")
		gb := float64(n) * smallBytes / 1e9
		perGB := func(cpu, m float64) string {
			if math.IsNaN(cpu) || math.IsNaN(m) {
				return "-"
			}
			return fmt.Sprintf("%.2f s/GB", cpu/gb)
		}
		for _, k := range smallKeys {
			m := r.median(c, k, value)
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s MiB | %s | %s | %s |\n", n, names[k], show(m, "MB/s"), ceil, vsBest(m, best),
				rep.disk(c, k), perGB(r.median(c, k, serverCPU), m), perGB(r.median(c, k, clientCPU), m), r.runs(c, k))
		}
	}
}

// disk is the median MiB the disk read in a readers run.
func (rep report) disk(c, k string) string {
	v := rep.res.median(c, k, diskMiB)
	if math.IsNaN(v) {
		return "nan"
	}
	return fmt.Sprintf("%.0f", v)
}

func render(rep report) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	o, h := rep.o, rep.host
	cases := ""
	if len(o.cases) != len(allCases) {
		cases = " -cases " + strings.Join(o.cases, ",")
	}
	p("# NBD server performance: bootfleet against qemu-nbd, nbdkit and nbd-server\n\n")
	p("Written by `make bench-nbd` (bench/nbd: -rounds %d -reader-rounds %d -short-repeat %d -runtime %d%s) on %s in %.0f s.\n",
		o.rounds, o.readerRounds, o.shortRepeat, o.runtime, cases, rep.written.UTC().Format("2006-01-02T15:04:05Z"), rep.elapsed.Seconds())
	p("Machine: %d CPUs (%s), shared with other work;\n", h.CPUs, h.CPU)
	p("load average before: %s, after: %s. bootfleet %s;\n", h.Load, rep.loadAfter, h.Version)
	p("%s.\n\n", rep.tools)
	p("The target: bootfleet ahead of the best peer on every case.\n\n")
	p("## Summary\n\n")
	p("Sequential read:\n")
	rep.verdict(&w, "seq", "MB/s", readerKeys)
	p("\n4 KiB random read, queue depth 32:\n")
	rep.verdict(&w, "rr", "IOPS", readerKeys)
	p("\n4 KiB random write, queue depth 32:\n")
	rep.verdict(&w, "rw", "IOPS", writerKeys)
	p("\n4 KiB random write to the disk (%s), queue depth 32:\n", rep.fstype)
	rep.verdict(&w, "rwd", "IOPS", dwriterKeys)
	p("\n4 KiB random write to the disk right after a cold read of the whole export, queue depth 32:\n")
	rep.verdict(&w, "rwd-read", "IOPS", dwriterKeys)
	for _, n := range readerCounts {
		p("\n%d concurrent readers of one %d MiB image, cold page cache (aggregate):\n", n, smallBytes>>20)
		rep.verdict(&w, fmt.Sprintf("readers%d", n), "MB/s", smallKeys)
	}
	var disk []string
	for _, k := range smallKeys {
		var per []string
		for _, n := range readerCounts {
			per = append(per, rep.disk(fmt.Sprintf("readers%d", n), k))
		}
		disk = append(disk, names[k]+": "+strings.Join(per, " "))
	}
	p("\nDisk reads with 1, 10, %d readers (MiB, median): %s.\n\n", readersMax, strings.Join(disk, "; "))

	rep.setup(&w)

	p("## Sequential read, whole %d MiB export (nbdcopy to null:)\n\n", imgBytes>>20)
	rep.table(&w, "seq", "MB/s", "ceil", readerKeys)
	p("\nnbdcopy reading the local file instead (client cost without NBD): %s (`%s`).\n", show(rep.res.median("seq", "ceil2", value), "MB/s"), rep.res.cmds["seq/ceil2"])
	var multi []string
	for _, k := range readerKeys {
		if v, ok := rep.multi[k]; ok {
			multi = append(multi, names[k]+": "+v)
		}
	}
	p("Multi-conn offered: %s.\n\n", strings.Join(multi, "; "))
	p("## 4 KiB random read (fio nbd engine, queue depth 32)\n\n")
	rep.table(&w, "rr", "IOPS", "ceil", readerKeys)
	rep.writeSections(&w)
	p("## Server commands\n\n")
	for _, s := range []struct{ name, key string }{{"bootfleet", "bf"}, {"qemu-nbd", "qemu"}, {"nbdkit", "kit"}, {"nbd-server", "nbds"}} {
		p("- %s: `%s`\n", s.name, rep.srvCmds[s.key])
	}
	if len(rep.res.errors) > 0 {
		errs := slices.Compact(slices.Sorted(slices.Values(rep.res.errors)))
		p("\n## Errors\n\n```\n%s\n```\n", strings.Join(errs[:min(30, len(errs))], "\n"))
	}
	return strings.ReplaceAll(w.String(), rep.work, "$WORK")
}

func (rep report) setup(w *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	o := rep.o
	p("## Setup and limits\n\n")
	p("- One %d MiB image of random data on /dev/shm (tmpfs): **no disk limit**. bootfleet serves its imported copy\n", imgBytes>>20)
	p("  (same bytes, also on tmpfs, in its data directory; overlays there too); the peers serve the file itself.\n")
	p("  Every read-only export was compared byte for byte with the image before timing.\n")
	p("- All traffic on the loopback of a private network namespace: **no link limit**. Client and server share the\n")
	p("  same %d CPUs, so CPU per request is the limit, and a server's CPU use takes CPU from its client.\n", rep.host.CPUs)
	p("- Ceiling column: the same work on the local file without NBD: `dd` to /dev/null (memory copy out of tmpfs) for\n")
	p("  sequential read, `fio` psync on the file for random I/O. The practical ceiling for an NBD server here is the best\n")
	p("  peer, which the \"vs best peer\" column compares with.\n")
	p("- Server CPU: user+system time of the server process (nbd-server: its reaped per-connection children), median,\n")
	p("  per GB moved or per 4 KiB operation. A fio run's operations are counted as its IOPS over the %d s measured plus\n", o.runtime)
	p("  the 1 s ramp, which its CPU time covers too (client CPU alike).\n")
	p("- Client CPU: user+system time of the client processes (fio, nbdcopy), median, per GB or per operation; for fio\n")
	p("  also its share of one CPU over the run. fio's nbd engine is one thread: near 100%% of a CPU the client, not the\n")
	p("  server, sets the IOPS, and servers that all reach that point can only tie, within the noise.\n")
	p("- Medians of %d runs (sequential read: %d, %d per round, since each lasts a fraction of a\n", o.rounds, o.rounds*o.shortRepeat, o.shortRepeat)
	p("  second; the mean of the middle two for an even count); each round runs every server, starting with a different one.\n")
	p("  Reads run first, with")
	p(" bootfleet's persistent overlay empty, then writes. The fio runs use one connection, 4 KiB, queue depth 32,\n")
	p("  1 s ramp then %d s; nbdcopy uses its defaults (4 connections when the server offers multi-conn, else 1).\n", o.runtime)
	p("- Summary lines also give the median over rounds (and repetitions) of bootfleet's figure over the best peer's in the same one:\n")
	p("  runs of one round are seconds apart, so that ratio moves less with the machine's load than the medians do.\n")
	p("  They also count the paired runs bootfleet won, with a two-sided sign test: p is the chance of a count that far\n")
	p("  from half if the two servers were equal. Where p >= 0.05 the row cannot be told apart from a tie in this run,\n")
	p("  whatever its medians say (with 5 rounds even 5 wins of 5 gives p = 0.06).\n")
	p("- Noise: other work shares the CPUs, and the slowest and fastest run of one row differ by up to %.1fx\n", rep.res.spread())
	p("  in this run. Server CPU per unit of work moves much less between runs than throughput: compare it too.\n")
	if rep.pageReporting {
		p("- This machine is a VM that hands memory it frees back to its host (free page reporting). The first touch of such\n")
		p("  memory is several times slower than of memory in use: runs that need fresh memory (a cold page cache, a server's\n")
		p("  first buffers) pay it, which is much of the spread between the rounds of one row.\n")
	}
	p("\n")
}

// writeSections are the write cases, the filled overlay and the readers.
func (rep report) writeSections(w *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## 4 KiB random write (fio nbd engine, queue depth 32)\n\n")
	p("bootfleet's writes go to the machine's persistent copy-on-write overlay (overlay: none refuses writes with EPERM,\n")
	p("so it has no row); the peers write into the image file. Round 1 is the overlay's first touch of each 64 KiB\n")
	p("block (copy from the base, then write); later rounds write into blocks it holds. A write into a held block is\n")
	p("taken on the request loop when the overlay's file system accepts RWF_NOWAIT writes (tmpfs here, or XFS);\n")
	p("ext4 refuses them, and there only writes of whole pages are (they need nothing from the disk); the rest go\n")
	p("through worker goroutines.\n\n")
	rep.table(w, "rw", "IOPS", "ceil", writerKeys)
	p("\n## 4 KiB random write, on the disk\n\n")
	p("The same, with the files on the real disk (/dev/%s, %s), where persistent overlays usually live:\n", rep.dev, rep.fstype)
	p("bootfleet's second server (data directory on the disk) serves a machine with a persistent overlay on a copy\n")
	p("of the image imported there; the peers write into a copy of the image on the disk. Before each run, `sync`\n")
	p("(untimed) writes back what the run before it left dirty. A run dirties at most the file's %d MiB, below\n", imgBytes>>20)
	p("the kernel's dirty limits here (%s%% and %s%% of memory), so this measures the file system's\n", rep.dirty[0], rep.dirty[1])
	p("buffered write path, not the disk.\n\n")
	rep.table(w, "rwd", "IOPS", "ceil", dwriterKeys)
	p("\n## 4 KiB random write to the disk, right after a read of it\n\n")
	p("The case above again, but before each run the server's files leave the page cache (`sync`, then\n")
	p("`dd iflag=nocache count=0` on each) and the server reads its whole export (`nbdcopy URI null:`, untimed), as a\n")
	p("client that reads its disk and then writes. On ext4 since Linux 6.16 the page cache holds what readahead brought\n")
	p("in as large folios (up to 2 MiB), and a 4 KiB write into one walks every buffer head of the folio. bootfleet reads\n")
	p("its overlay with `POSIX_FADV_RANDOM` (single pages, only those asked for) and copies blocks in a page at a time.\n")
	p("This kernel: %s. The ceiling is the one of the case above (no read before it).\n\n", rep.host.Kernel)
	rep.table(w, "rwd-read", "IOPS", "ceil", dwriterKeys)
	p("\n## 4 KiB random read through a filled overlay\n\n")
	p("The persistent export again, after the write case wrote into its overlay, so reads come from the overlay.\n\n")
	rep.table(w, "rr-ovl", "IOPS", "ceil", []string{"bf-pers"})
	small := smallBytes >> 20
	p("\n## Concurrent readers of one image, from the disk\n\n")
	p("A %d MiB image of random data on the real disk (/dev/%s, %s); before each run its page cache\n", small, rep.dev, rep.fstype)
	p("is dropped (`dd iflag=nocache count=0`), so the first reader's pages come from the disk and the others should share\n")
	p("them. n clients then read the whole image at once, one connection each; bootfleet serves each reader as its own\n")
	p("machine (overlay: ephemeral, the lab setting), the peers serve the file. \"Read from disk\" is the sectors /dev/%s read\n", rep.dev)
	p("during the run (the whole machine's, so other work adds a little): the image is %d MiB, and a server that reads\n", small)
	p("it once per reader would show n times that. Every server reads the same file, bootfleet's imported blob under its\n")
	p("data directory (the peers serve it read-only): on this VM a cold read costs more when the disk's host has not read\n")
	p("the file lately, and servers reading files of their own were not measured alike. Before each reader count an\n")
	p("untimed cold read of the file goes first: the first cold read after a burst of readers was slower, for any server.\n")
	ceilCmd := rep.res.cmds["readers/ceil-sm"]
	if _, rest, ok := strings.Cut(ceilCmd, " x "); ok {
		ceilCmd = "n x " + rest
	}
	p("The ceiling is the same n readers on the local file without NBD (`%s`,\n", ceilCmd)
	p("after the same drop): what the disk and the shared page cache give when no server and no socket is in the way.\n")
	p("Medians of %d rounds; each round runs 1, then 10, then %d readers on every server in turn. One reader's runs\n", rep.o.readerRounds, readersMax)
	p("last about a tenth of a second, so each round runs them %d times, each time in a new server order (%d runs).\n\n", rep.o.shortRepeat, rep.o.readerRounds*rep.o.shortRepeat)
	rep.readersTable(w)
	var peers []string
	for _, k := range smallKeys[1:] {
		peers = append(peers, names[k]+" "+rep.uris[k])
	}
	p("\nCommands: bootfleet: `%s`; peers: `n x nbdcopy --connections=1 URI null:` with URI\n", rep.res.cmds["readers/bf-sm"])
	p("%s.\n\n", strings.Join(peers, "; "))
}
