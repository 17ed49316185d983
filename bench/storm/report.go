package storm

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/mcast"
)

// Wire cost of payload on Ethernet: a TFTP block of 1468 bytes (OVMF's
// blksize) carries 70 bytes of TFTP, UDP, IP and Ethernet headers, FCS,
// preamble and gap; a TCP segment of 1448 (MSS with timestamps) carries 90.
const (
	tftpWire = (1468.0 + 70) / 1468
	tcpWire  = (1448.0 + 90) / 1448
)

type report struct {
	Host     harness.Host
	Opts     *options
	Runs     []run
	Elapsed  time.Duration
	Files    map[string]int64
	Shaping  []string
	Versions []string
	Plots    plots
}

// perMachine is what one machine of firmware fw must receive: the NBP over
// TFTP (uefi and bios), kernel and initrd over HTTP, the trace over NBD.
func (r *report) perMachine(fw string) (tftp, tcp int64) {
	if fw != "ipxe" {
		tftp = r.Files["ipxe.efi"]
	}
	return tftp, r.Files["vmlinuz"] + r.Files["initrd.img"] + r.Files["trace reads"]
}

// limit is the physical limit for n machines by unicast: the time their
// bytes take on the server's link at its rate.
func (r *report) limit(fw string, n int) float64 {
	tftp, tcp := r.perMachine(fw)
	bps, err := harness.ParseRate(r.Opts.rate)
	if err != nil || bps <= 0 {
		return math.NaN()
	}
	return float64(n) * (float64(tftp)*tftpWire + float64(tcp)*tcpWire) * 8 / bps
}

// mcastWire is the wire cost of the multicast's payload: a fragment of
// chunkwire.FragmentSize bytes carries its Data header and
// mcast.WireOverhead (UDP, IP, Ethernet, preamble and gap).
const mcastWire = float64(chunkwire.FragmentSize+chunkwire.DataHeaderLen+mcast.WireOverhead) / chunkwire.FragmentSize

// mtftpWire is the wire cost of an MTFTP block: 512 bytes carry the same
// 70 bytes of headers as a TFTP block.
const mtftpWire = (512.0 + 70) / 512

// mtftpOnce is what crosses the link once by iPXE's MTFTP for a machine
// of firmware fw, and the unicast bytes it replaces: on UEFI the UKI the
// server builds of kernel and initrd (when it can: a real kernel and the
// stub), else the kernel alone; nothing for a file of 65535 blocks of 512
// bytes or more, which the server names no mtftp:// for.
func (r *report) mtftpOnce(fw string) (once, replaces int64) {
	if u := r.Files[ukiFile]; u > 0 && u < 65535*512 && fw == "uefi" {
		return u, r.Files["vmlinuz"] + r.Files["initrd.img"]
	}
	if k := r.Files["vmlinuz"]; k < 65535*512 {
		return k, k
	}
	return 0, 0
}

// mcastLimit is the physical limit for n machines when the root's working
// set W crosses the link once by multicast and the MTFTP file K (UKI or
// kernel) once: (N × U + K + W) / link, U being what each machine still
// fetches by unicast (ipxe.efi, and the initrd where K is the kernel; the
// trace replays no writes).
func (r *report) mcastLimit(fw string, n int) float64 {
	tftp, tcp := r.perMachine(fw)
	bps, err := harness.ParseRate(r.Opts.rate)
	if err != nil || bps <= 0 {
		return math.NaN()
	}
	w := r.Files["trace reads"]
	k, replaces := r.mtftpOnce(fw)
	u := float64(tftp)*tftpWire + float64(tcp-w-replaces)*tcpWire
	return (float64(n)*u + float64(k)*mtftpWire + float64(w)*mcastWire) * 8 / bps
}

// limitFor is the limit a stack's storm is held to: the multicast one for
// the multicast stack, the unicast one for the others (the dropped
// multicast must fall back to it).
func (r *report) limitFor(stack, fw string, n int) float64 {
	if stack == stackMulticast {
		return r.mcastLimit(fw, n)
	}
	return r.limit(fw, n)
}

func wallOf(r run) float64 {
	if r.Report == nil {
		return math.NaN()
	}
	return r.Report.Summary.WallSeconds
}

func bootedOf(r run) int {
	if r.Report == nil {
		return 0
	}
	return r.Report.Summary.Booted
}

// row is the median over runs of one stack, firmware and N.
type row struct {
	runs                []run
	wall, p50, p99      float64
	serverCPU, clientCP float64
	rss                 float64
	machineBusy         float64 // share of all CPUs' time, 0 when not measured
	booted, failed      int     // of the median-wall run
	failures            []string
}

func (r *report) row(stack, fw string, n int) *row {
	out := &row{}
	var walls, p50s, p99s, scpu, ccpu, rss, busy []float64
	for _, x := range r.Runs {
		if x.Stack != stack || x.Firmware != fw || x.N != n {
			continue
		}
		out.runs = append(out.runs, x)
		if x.Err != "" {
			out.failures = append(out.failures, x.Err)
			continue
		}
		s := x.Report.Summary
		out.failed += s.Failed + s.Pending
		out.booted += s.Booted
		for res, k := range s.Failures {
			out.failures = append(out.failures, fmt.Sprintf("%d× %s", k, res))
		}
		walls = append(walls, s.WallSeconds)
		if b, ok := s.Phases["boot"]; ok && b.Count > 0 {
			p50s, p99s = append(p50s, b.P50), append(p99s, b.P99)
		}
		scpu, ccpu, rss = append(scpu, x.ServerCPU), append(ccpu, x.ClientCPU), append(rss, float64(x.PeakRSS))
		busy = append(busy, x.MachineBusy)
	}
	if len(out.runs) == 0 {
		return nil
	}
	out.wall, out.p50, out.p99 = harness.Median(walls), harness.Median(p50s), harness.Median(p99s)
	out.serverCPU, out.clientCP, out.rss = harness.Median(scpu), harness.Median(ccpu), harness.Median(rss)
	out.machineBusy = harness.Median(busy)
	return out
}

func secs(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f s", x)
}

func times(x, of float64) string {
	if math.IsNaN(x) || math.IsNaN(of) || of <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/of)
}

func mb(x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", x/(1<<20))
}

func (r *report) render() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	o := r.Opts
	p("# Boot storms: bootfleet against dnsmasq + nginx + nbdkit\n\n")
	p("Written by `make bench-storm` (bench/storm) on %s; the run took %s.\n\n", r.Host, r.Elapsed.Round(time.Second))
	tftp, tcp := r.perMachine("uefi")
	p("N emulated machines (`bootfleet storm`) power on at once and boot through DHCP, TFTP of ipxe.efi (uefi only: ")
	p("OVMF's tsize probe, then windowsize 4, blksize 1468), DHCP as iPXE, the iPXE script and the files it names over HTTP, ")
	p("the replay of a real boot's NBD reads, and the DoneURL. Each machine receives %s over TFTP (uefi) and %s over TCP ",
		harness.MiB(tftp), harness.MiB(tcp))
	p("(kernel %s, initrd %s, NBD trace %s). The server's link is shaped to %s (only its egress: the clients stand ",
		harness.MiB(r.Files["vmlinuz"]), harness.MiB(r.Files["initrd.img"]), harness.MiB(r.Files["trace reads"]), o.rate)
	p("for many machines, each with its own link). **Limit** is the time those bytes of all N machines take on that link, ")
	p("Ethernet framing included; **× limit** is the storm's wall time over it (1.00× is the physical best). ")
	p("Every server starts fresh for every storm; %d run(s) per figure, medians. ", o.runs)
	if o.warmUp {
		p("Before each storm of the multicast stacks, one machine boots the same content against the same server, not counted ")
		p("(neither its time nor its CPU is in the figures): a lab's server has seen its image boot before, and learns from ")
		p("that boot the order in which the content is read, which the storm's machines then read ahead by.")
	} else {
		p("No machine boots before the storms (-warm-up=false): the server knows no read order and the machines read no further ahead than their reads.")
	}
	p("\n\n")
	p("The peer stack is the one admins build by hand: dnsmasq (DHCP and TFTP, ipxe.org's chainloading recipe with ")
	p("no-ping and iPXE's no-pxedhcp, every advantage), nginx (sendfile) for the script and files, nbdkit's file plugin ")
	p("for the root. It serves one static script and **one read-only export to every machine: no per-machine overlay**, ")
	p("where bootfleet gives each machine its own copy-on-write overlay (ephemeral, as a lab runs).\n\n")

	p("**bootfleet-multicast** is bootfleet with its multicast of the root's base on (multicast mode auto, its default, paced at %s: ", o.mcastRate)
	p("what its default rate, half the link, gives on a 1 Gbit/s NIC, set here since the veth under the shaped link reports 10 Gbit/s): ")
	p("each emulated machine runs the agent's own root proxy (internal/rootproxy, with its mcast.Receiver and a read cache ")
	p("of 10%% of an emulated 2 GiB of RAM), which joins the content's group and asks the server for the chunks its reads miss. ")
	p("Two things are shared in the simulator that real machines have each their own of: one socket per group hands every ")
	p("datagram to every emulated machine's Receiver (mcast.Hub), and their caches keep the content's bytes once ")
	p("(mcast.SharedSlab), each with its own slots and eviction; 200 caches of a desktop's working set would not fit in RAM. ")
	p("The Hub checks each datagram (its CRC) once and hands the parsed datagram to every Receiver, where a real machine ")
	p("checks its own copy, and a fragment already in the SharedSlab is not written again, though each machine's cache ")
	p("still counts it and commits the chunk for itself. ")
	k, replaces := r.mtftpOnce("uefi")
	if r.Files[ukiFile] > 0 {
		p("Kernel and initrd go as one file by iPXE's PXE MTFTP (`mtftp://`, the server's default `multicast.mtftp: auto`): ")
		p("the server builds UEFI machines a unified kernel image (internal/uki: Debian's systemd-stub, the kernel, the ")
		p("initrd) and the script names it mtftp:// ahead of the plain kernel and initrd lines; its carousel sends it to ")
		p("239.255.1.1:3001 for every machine that asked, and repairs the latest asker's gaps through it as iPXE's master ")
		p("client. The kernel is Debian's (%s), the initrd random bytes. ", harness.MiB(r.Files["vmlinuz"]))
	} else {
		p("The kernel goes by iPXE's PXE MTFTP (`mtftp://`, the server's default `multicast.mtftp: auto`): the script names it ")
		p("mtftp:// with its HTTP URL after ||, and the server's carousel sends it to 239.255.1.1:3001 for every machine that ")
		p("asked; the kernel here is random bytes, from which no UKI can be built, so the initrd stays unicast. ")
	}
	p("The simulator's machines run iPXE's mtftp client (internal/storm, mtftp.go: its RRQ, peer, bitmap, retry timer, ")
	p("master client's ACKs and fallback to plain TFTP), sharing one socket on the group as they share one per root group. ")
	p("Its limit is **(N × U + K + W) / link**: U = %s, what each machine still fetches by unicast (ipxe.efi%s; ",
		harness.MiB(tftp+tcp-r.Files["trace reads"]-replaces), map[bool]string{true: "", false: ", initrd"}[r.Files[ukiFile] > 0])
	p("the trace replays no writes), K = %s, the %s, sent once by MTFTP (512-byte blocks, framing included), ", harness.MiB(k),
		map[bool]string{true: "UKI", false: "kernel"}[r.Files[ukiFile] > 0])
	p("W = %s, the trace's working set, sent once (multicast framing included). ", harness.MiB(r.Files["trace reads"]))
	p("**bootfleet-multicast-dropped** is the same with every datagram to 239.0.0.0/8 dropped by nft on the server, as a ")
	p("network that drops the group would: the agents must notice the silence and read by unicast, and each iPXE hears ")
	p("nothing on the MTFTP group and takes plain TFTP after 1.75 s (its fourth silent timeout), so it is held to the ")
	p("unicast limit. The unicast **bootfleet** stack runs with multicast off, so its scripts name the kernel by HTTP.\n\n")
	p("The server's link is shaped with htb rather than one tbf FIFO: the groups' datagrams (marked by nft with ")
	p("`meta priority set %s`) have a class of their own beside the rest, each guaranteed half the rate and borrowing what ", harness.PaceClass)
	p("the other leaves. In a single FIFO the TCP of hundreds of kernel and initrd downloads fills the queue and the paced ")
	p("multicast loses its datagrams there; a real server's NIC queue (Debian's default fq_codel) or a switch does not ")
	p("starve a paced flow like that. The unicast stacks run on the same link, where the class is idle.\n\n")

	r.renderTargets(p)
	r.renderMulticastTargets(p)
	r.renderShares(p)
	for _, pl := range []struct{ file, alt string }{
		{r.Plots.booted, fmt.Sprintf("machines booted against time, N = %d", o.clients[len(o.clients)-1])},
		{r.Plots.scaling, "time until every machine booted against N"},
	} {
		if pl.file != "" {
			p("![%s](%s)\n\n", pl.alt, filepath.ToSlash(filepath.Join(o.plots, pl.file)))
		}
	}
	for _, fw := range o.firmwares {
		p("## %s machines\n\n", fw)
		p("| N | limit | stack | wall | × limit | booted | failed | boot p50 | boot p99 | p99/p50 | server CPU | simulator CPU | server peak RSS |\n")
		p("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range o.clients {
			for _, st := range o.stacks {
				x := r.row(st, fw, n)
				if x == nil {
					continue
				}
				lim := r.limitFor(st, fw, n)
				p("| %d | %s | %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |\n", n, secs(lim), st,
					secs(x.wall), times(x.wall, lim), x.booted, x.failed, secs(x.p50), secs(x.p99), ratio(x.p99, x.p50),
					secs(x.serverCPU), secs(x.clientCP), mb(x.rss))
			}
		}
		p("\n")
	}
	r.renderRoots(p)
	r.renderImages(p)
	r.renderFailures(p)
	p("## Where the time goes\n\n")
	p("The machine has %d CPUs for the server, the simulator playing all N machines, and the kernel's packet work on both ", r.Host.CPUs)
	p("sides of the link. A storm whose server CPU plus simulator CPU approaches %d × its wall time was bound by the CPUs, ", r.Host.CPUs)
	p("not by the server's link; its × limit then measures this machine, not the server. Server CPU is the server's cgroup ")
	p("(every process of the stack), simulator CPU the simulator's own rusage. The kernel delivers a datagram through ")
	p("the veth pair in the sender's system call, so the server's CPU includes taking its datagrams into the simulator's ")
	p("sockets: `perf record -a -g` during a storm shows it under the server's sendmmsg.\n\n")
	if slices.Contains(o.stacks, stackMulticast) {
		p("With multicast, a storm can be bound by the simulator's CPUs without using them all. Every emulated machine ")
		p("takes the group's datagrams from the simulator's one socket per group (mcast.Hub), so when the Hub's goroutine ")
		p("waits for a CPU, every machine's datagrams wait in that socket, and every machine holds back its requests ")
		p("until it has read them, as a busy agent does (it must not ask the server again for what already waits in its ")
		p("socket). The machines then move together: at N = 200 each one's root phase ends within a fraction of a second ")
		p("of the others', however early it began. A real machine reads its own socket with its own CPU.\n\n")
	}
	r.renderCPU(p)
	p("## Commands\n\n```sh\n# as root, from the repository root:\nmake bench-tools\nbin/bench storm -out %s -clients %s -firmware %s -stacks %s -runs %d -initrd-mib %d -trace %s -mcast-rate %s\n\n",
		filepath.Base(o.out), joinInts(o.clients), strings.Join(o.firmwares, ","), strings.Join(o.stacks, ","), o.runs, r.Files["initrd.img"]>>20, o.trace, o.mcastRate)
	p("# link\n%s\n\n# simulator, in %s, for each firmware F and N:\n", strings.Join(r.Shaping, "\n"), nsClient)
	p("bin/bootfleet storm -i %s -n N --firmware F --trace %s --timeout %s -o json\n", devClient, o.trace, o.timeout)
	if slices.Contains(o.stacks, stackMulticast) {
		top := o.clients[len(o.clients)-1]
		p("# %s, N = %d, firmware %s, adds: --cpu-profile %s-cpu/%s-%s-%d-runR.pprof\n", stackMulticast, top, o.firmwares[0],
			strings.TrimSuffix(filepath.Base(o.out), ".md"), stackMulticast, o.firmwares[0], top)
	}
	p("```\n\n")
	p("bootfleet's config for bootfleet-multicast (DIR is fresh per storm; the unicast stack has `multicast: {mode: off}`):\n\n```yaml\n%s```\n\n", strings.ReplaceAll(
		(&bench{o: o}).bootfleetConfig(stackMulticast, "DIR"), o.work, "$WORK"))
	var drop []string
	for _, a := range nftTable(nftDrop, "drop") {
		drop = append(drop, harness.ShellJoin(a))
	}
	p("bootfleet-multicast-dropped adds, for its storms only:\n\n```sh\n%s\n```\n\n", strings.Join(drop, "\n"))
	p("The peer: `%s`, nginx with sendfile serving $WORK/www, `nbdkit --foreground --readonly --ipaddr %s --port 10809 file $WORK/root.img`, and this script:\n\n```\n%s```\n\n",
		strings.ReplaceAll(harness.ShellJoin((&bench{o: o}).peerDnsmasq("DIR")), o.work, "$WORK"), serverIP, peerScript())
	p("Versions: %s.\n", strings.Join(r.Versions, "; "))
	return w.String()
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// A storm is ahead of or behind the other by more than tieBand of the
// peer's wall time, else tied: one run on this shared machine moves by a
// per cent or two. atLimit is how close to the link limit both must be
// for a tie to be the physical best (tbf's burst lets a run land a little
// under the limit, too).
const (
	tieBand = 0.02
	atLimit = 1.05
)

func (r *report) renderTargets(p func(string, ...any)) {
	o := r.Opts
	top := o.clients[len(o.clients)-1]
	p("## Targets, strictly read\n\n| target | measured | |\n|---|---|---|\n")
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	if x := r.row("bootfleet", "uefi", top); x != nil {
		lim := r.limit("uefi", top)
		p("| %d uefi machines all booted within 1.15× the link limit | %s against a limit of %s (%s), %d booted, %d failed | %s |\n",
			top, secs(x.wall), secs(lim), times(x.wall, lim), x.booted, x.failed, mark(x.wall <= 1.15*lim && x.failed == 0 && x.booted == top*len(x.runs)))
		p("| fairness: p99/p50 of per-machine boot time at most 1.3 at N = %d | p50 %s, p99 %s: %s | %s |\n",
			top, secs(x.p50), secs(x.p99), ratio(x.p99, x.p50), mark(x.p99 <= 1.3*x.p50))
		p("| server memory bounded and reported at N = %d | peak RSS %s | reported |\n", top, mb(x.rss))
	}
	var ahead, tied, behind []string
	atLimitTie := false
	for _, fw := range o.firmwares {
		for _, n := range o.clients {
			a, b := r.row("bootfleet", fw, n), r.row("peer", fw, n)
			if a == nil || b == nil {
				continue
			}
			lim := r.limit(fw, n)
			cell := fmt.Sprintf("%s N=%d (%.2f s against %.2f s)", fw, n, a.wall, b.wall)
			switch {
			case a.failed == 0 && b.failed > 0:
				ahead = append(ahead, fmt.Sprintf("%s N=%d (the peer failed %d of %d)", fw, n, b.failed, b.failed+b.booted))
			case a.failed > 0:
				behind = append(behind, fmt.Sprintf("%s N=%d (%d failed)", fw, n, a.failed))
			case a.wall < (1-tieBand)*b.wall:
				ahead = append(ahead, cell)
			case a.wall <= (1+tieBand)*b.wall:
				tied = append(tied, cell)
				atLimitTie = atLimitTie || (a.wall <= atLimit*lim && b.wall <= atLimit*lim)
			default:
				behind = append(behind, cell)
			}
		}
	}
	if n := len(ahead) + len(tied) + len(behind); n > 0 {
		var got []string
		if len(ahead) == n {
			got = append(got, "ahead at every N")
		} else {
			for _, g := range []struct {
				what  string
				cells []string
			}{{"ahead at", ahead}, {fmt.Sprintf("tied (within %.0f%%) at", 100*tieBand), tied}, {"behind at", behind}} {
				if len(g.cells) > 0 {
					got = append(got, g.what+" "+strings.Join(g.cells, ", "))
				}
			}
		}
		p("| ahead of the peer stack at every N | %s | %s |\n", strings.Join(got, "; "), mark(len(ahead) == n))
		if atLimitTie {
			p("\nWhere both stacks finish at the link limit neither can be ahead: each machine must receive the same bytes ")
			p("(the firmware asks for them), and the link carries no more than it carries. A tie there is the physical best; ")
			p("being ahead of it would need fewer bytes on the wire, which real clients do not allow.\n")
		}
	}
	p("\n")
}

// renderShares says what fair shares of the link mean for when machines
// come up, from bootfleet's storm at the largest N.
func (r *report) renderShares(p func(string, ...any)) {
	fw, top := r.Opts.firmwares[0], r.Opts.clients[len(r.Opts.clients)-1]
	x := r.medianRun("bootfleet", fw, top)
	if x == nil || top < 2 {
		return
	}
	done := x.bootTimes()
	if len(done) < top {
		return
	}
	lim := r.limit(fw, top)
	p("Every machine gets an equal share of the link, so all %d %s machines finish close together: the first booted after %s, ",
		top, fw, secs(done[0]))
	p("half after %s, the last after %s. Served one after another on the same link, half would have been up after %s ",
		secs(done[top/2-1]), secs(done[top-1]), secs(lim/2))
	p("and the last at the same time: the fairness target above asks for the former.\n\n")
}

func (r *report) renderFailures(p func(string, ...any)) {
	var lines []string
	for _, x := range r.Runs {
		switch {
		case x.Err != "":
			lines = append(lines, fmt.Sprintf("- %s, %s, N=%d, run %d: %s", x.Stack, x.Firmware, x.N, x.Run, x.Err))
		case x.Report != nil && len(x.Report.Summary.Failures) > 0:
			var fs []string
			for res, k := range x.Report.Summary.Failures {
				fs = append(fs, fmt.Sprintf("%d× %s", k, res))
			}
			sort.Strings(fs)
			lines = append(lines, fmt.Sprintf("- %s, %s, N=%d, run %d: %s", x.Stack, x.Firmware, x.N, x.Run, strings.Join(fs, "; ")))
		}
	}
	if len(lines) == 0 {
		return
	}
	p("## Failures\n\n%s\n\n", strings.Join(lines, "\n"))
}

func joinInts(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}
