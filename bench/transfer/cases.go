package transfer

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// Fixed parameters of the cases, from the performance targets.
const (
	mtuBlksize   = 1456 // the blksize firmware asks for on a 1500-MTU link
	bigBlksize   = 8192 // "a client asking for too much"
	stormWindow  = 4    // OVMF's default windowsize
	concWindow   = 64
	lossWindow   = 4
	lossDeadline = 120 * time.Second
)

func (b *bench) runCase(ctx context.Context, c int) {
	switch c {
	case 1:
		b.case1(ctx)
	case 2:
		b.case2(ctx)
	case 3:
		b.case3(ctx)
	case 4:
		b.case4(ctx)
	case 5:
		b.case5(ctx)
	}
}

func (b *bench) tftpSpecs() []*serverSpec {
	var out []*serverSpec
	for _, s := range b.specs {
		if s.tftp {
			out = append(out, s)
		}
	}
	return out
}

func (b *bench) httpSpecs() []*serverSpec {
	var out []*serverSpec
	for _, s := range b.specs {
		if s.http {
			out = append(out, s)
		}
	}
	return out
}

// startFor starts spec in t and records its command line; on failure it
// notes why and returns nil, so the other servers are still measured.
func (b *bench) startFor(ctx context.Context, c int, spec *serverSpec, t *harness.Net, asHTTP bool) *server {
	s, err := b.start(ctx, spec, t, asHTTP)
	if err != nil {
		if ctx.Err() == nil {
			b.note("case %d, %s, %s: not measured: %v", c, spec.name, t.Name, err)
		}
		return nil
	}
	cmd := harness.ShellJoin(s.Argv)
	for i := range b.res.Servers {
		si := &b.res.Servers[i]
		if si.Name == spec.name && !contains(si.Cmds, cmd) {
			si.Cmds = append(si.Cmds, cmd)
		}
	}
	return s
}

// withServer runs fn with spec started in t, and always stops the server
// afterwards, also when fn returns early on a cancel.
func (b *bench) withServer(ctx context.Context, c int, spec *serverSpec, t *harness.Net, asHTTP bool, fn func(s *server)) {
	if ctx.Err() != nil {
		return
	}
	s := b.startFor(ctx, c, spec, t, asHTTP)
	if s == nil {
		return
	}
	defer s.Stop()
	fn(s)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// tftpSteps is client i fetching names in order with the given options.
func (b *bench) tftpSteps(t *harness.Net, blksize, window int, names ...string) func(int) []step {
	return func(i int) []step {
		var st []step
		for j, n := range names {
			fifo := filepath.Join(b.fifos, fmt.Sprintf("c%d-%d", i, j))
			st = append(st, step{argv: atftpArgv(t.ClientNS, t.ServerIP, n, fifo, blksize, window), fifo: fifo, want: b.files[n]})
		}
		return st
	}
}

func (b *bench) httpSteps(s *server, names ...string) func(int) []step {
	return func(i int) []step {
		var st []step
		for j, n := range names {
			fifo := filepath.Join(b.fifos, fmt.Sprintf("c%d-%d", i, j))
			url := fmt.Sprintf("http://%s:8080%s", s.topo.ServerIP, s.spec.urlPath(n))
			st = append(st, step{argv: curlArgv(s.topo.ClientNS, url, fifo), fifo: fifo, want: b.files[n]})
		}
		return st
	}
}

// clientCmd renders client 0's commands, the exact command behind a figure.
func clientCmd(steps func(int) []step, clients int) string {
	s := ""
	for j, st := range steps(0) {
		if j > 0 {
			s += " && "
		}
		s += harness.ShellJoin(st.argv)
	}
	if clients > 1 {
		s = fmt.Sprintf("%d clients at once, each: %s", clients, s)
	}
	return s
}

// figureBudget bounds the repetitions of one single-transfer figure: a slow
// peer under loss (a whole second per lost packet) would otherwise take
// minutes per figure.
const figureBudget = 60 * time.Second

// figure returns the measurement for case/topo/label/server, creating and
// registering it on first use, so that rounds can add runs to it.
func (b *bench) figure(c int, topo, label, server string, clients int, bytes int64, limit float64) *Measurement {
	if m := b.res.find(c, topo, label, server); m != nil {
		return m
	}
	m := &Measurement{Case: c, Topo: topo, Label: label, Server: server, Clients: clients, Bytes: bytes, LimitSec: limit}
	b.res.Meas = append(b.res.Meas, m)
	return m
}

// measureOnce adds one run to m, unless m is finished: a single transfer
// that timed out is not repeated (the figure is already "did not finish in
// time"), nor is one whose runs so far took figureBudget.
func (b *bench) measureOnce(ctx context.Context, m *Measurement, s *server, n int, steps func(int) []step, deadline time.Duration) {
	if m.SameAs != "" || m.done || ctx.Err() != nil {
		return
	}
	m.ServerCmd = harness.ShellJoin(s.Argv)
	m.ClientCmd = clientCmd(steps, m.Clients)
	if m.Clients == 1 && m.spent >= figureBudget.Seconds() {
		m.Note = fmt.Sprintf("%d of %d runs: they took %.0f s, over the %s per figure", len(m.Runs), n, m.spent, figureBudget)
		m.done = true
		return
	}
	cpu0, self0 := s.CPU(), harness.SelfCPU()
	busy0, total0, irq0 := harness.MachineCPU()
	cr := runClients(ctx, m.Clients, steps, deadline)
	if ctx.Err() != nil {
		return // interrupted: not a measurement
	}
	busy1, total1, irq1 := harness.MachineCPU()
	run := Run{Sec: cr.wall, OK: cr.failed == 0 && cr.timedOut == 0, Err: cr.firstErr,
		Failed: cr.failed, TimedOut: cr.timedOut, ServerCPU: s.CPU() - cpu0,
		ClientCPU: cr.cpu, HashCPU: harness.SelfCPU() - self0}
	if total1 > total0 {
		frac := run.Sec * float64(runtime.NumCPU()) / (total1 - total0) // CPU seconds per jiffy
		run.Busy = (busy1 - busy0) / (total1 - total0)
		run.IRQCPU = (irq1 - irq0) * frac
		run.OtherCPU = max(0, (busy1-busy0)*frac-run.ServerCPU-run.ClientCPU-run.HashCPU-run.IRQCPU)
	}
	if m.Clients > 1 {
		run.PerClient = cr.perClient
	}
	m.Runs = append(m.Runs, run)
	m.spent += run.Sec
	b.log.Info("measured", "case", m.Case, "topo", m.Topo, "server", m.Server, "config", m.Label,
		"run", fmt.Sprintf("%d/%d", len(m.Runs), n), "sec", fmt.Sprintf("%.3f", run.Sec),
		"MB/s", fmt.Sprintf("%.1f", float64(m.Bytes)/run.Sec/1e6), "ok", run.OK,
		"server_cpu", fmt.Sprintf("%.2f", run.ServerCPU), "client_cpu", fmt.Sprintf("%.2f", run.ClientCPU),
		"busy", fmt.Sprintf("%.0f%%", run.Busy*100), "other_cpu", fmt.Sprintf("%.2f", run.OtherCPU), "err", run.Err)
	if m.Clients == 1 && run.TimedOut > 0 {
		m.Note = fmt.Sprintf("timed out after %s; not repeated", deadline)
		m.done = true
	}
}

// sameAs marks m as sending the same packets as prev (the server ignored
// an option); its runs are filled in by resolveSameAs.
func (b *bench) sameAs(m, prev *Measurement, oack string) {
	m.SameAs = prev.Label
	m.Note = fmt.Sprintf("OACK %q: same transfer as %s", oack, prev.Label)
}

// resolveSameAs copies the runs of the figures that others repeat.
func (b *bench) resolveSameAs() {
	for _, m := range b.res.Meas {
		if m.SameAs == "" {
			continue
		}
		if prev := b.res.find(m.Case, m.Topo, m.SameAs, m.Server); prev != nil {
			m.Runs, m.ServerCmd, m.ClientCmd = prev.Runs, prev.ServerCmd, prev.ClientCmd
		}
	}
}

// Cases 1, 2, 4 and 5 run in rounds: each round starts every server in
// turn and measures each of its figures once. Other work on this shared
// machine then slows all servers alike instead of whichever happened to be
// measured while it ran.
func (b *bench) case1(ctx context.Context) {
	big := b.files["big.img"]
	limit := tftpLimitSeconds(big.Size, mtuBlksize, linkMTU, b.opt.rateBps)
	deadline := max(30*time.Second, time.Duration(15*limit*float64(time.Second)))
	cfgs := [][2]int{{mtuBlksize, 1}, {mtuBlksize, 4}, {mtuBlksize, 16}, {mtuBlksize, 64}, {bigBlksize, 4}, {bigBlksize, 64}}
	seen := map[string]map[[2]int]*Measurement{}
	for round := 0; round < b.opt.runs; round++ {
		for _, spec := range b.tftpSpecs() {
			b.withServer(ctx, 1, spec, b.shaped, false, func(s *server) {
				if seen[spec.name] == nil {
					seen[spec.name] = map[[2]int]*Measurement{}
				}
				for _, cfg := range cfgs {
					m := b.figure(1, "shaped", cfgLabel(cfg[0], cfg[1]), spec.name, 1, big.Size, limit)
					if round == 0 {
						// A server that ignores an option sends the same packets as
						// for a configuration already measured; that figure is reused.
						p, ok := b.probeInto(ctx, 1, s, cfg[0], cfg[1])
						key := [2]int{p.GotBlksize, p.GotWindow}
						if prev := seen[spec.name][key]; ok && prev != nil {
							b.sameAs(m, prev, p.OACK)
						} else if ok {
							seen[spec.name][key] = m
						}
					}
					b.measureOnce(ctx, m, s, b.opt.runs, b.tftpSteps(b.shaped, cfg[0], cfg[1], big.Name), deadline)
				}
			})
		}
	}
	b.resolveSameAs()
}

func cfgLabel(blksize, window int) string {
	return fmt.Sprintf("blksize %d, windowsize %d", blksize, window)
}

func (b *bench) case2(ctx context.Context) {
	big, conc := b.files["big.img"], b.files["conc.img"]
	n := b.opt.clients
	for round := 0; round < b.opt.runs; round++ {
		for _, spec := range b.tftpSpecs() {
			b.withServer(ctx, 2, spec, b.loop, false, func(s *server) {
				if round == 0 {
					b.probeInto(ctx, 2, s, mtuBlksize, concWindow)
				}
				m := b.figure(2, "loopback", "one transfer", spec.name, 1, big.Size, 0)
				b.measureOnce(ctx, m, s, b.opt.runs, b.tftpSteps(b.loop, mtuBlksize, concWindow, big.Name), 60*time.Second)
				m = b.figure(2, "loopback", fmt.Sprintf("%d concurrent", n), spec.name, n, int64(n)*conc.Size, 0)
				b.measureOnce(ctx, m, s, b.opt.runs, b.tftpSteps(b.loop, mtuBlksize, concWindow, conc.Name), b.opt.stormTimeout)
			})
		}
	}
}

func (b *bench) case3(ctx context.Context) {
	nbp, kern := b.files["nbp.efi"], b.files["kernel-initrd.img"]
	n := b.opt.clients
	limit := float64(n) * (tftpLimitSeconds(nbp.Size, mtuBlksize, linkMTU, b.opt.rateBps) +
		tftpLimitSeconds(kern.Size, mtuBlksize, linkMTU, b.opt.rateBps))
	for _, spec := range b.tftpSpecs() {
		b.withServer(ctx, 3, spec, b.shaped, false, func(s *server) {
			lock := b.figure(3, "shaped", stormLabel(1), spec.name, n, int64(n)*(nbp.Size+kern.Size), limit)
			win := b.figure(3, "shaped", stormLabel(stormWindow), spec.name, n, int64(n)*(nbp.Size+kern.Size), limit)
			if p, ok := b.probeInto(ctx, 3, s, mtuBlksize, stormWindow); ok && p.GotWindow <= 1 {
				b.sameAs(win, lock, p.OACK)
			}
			for range b.opt.stormRuns {
				b.measureOnce(ctx, lock, s, b.opt.stormRuns, b.tftpSteps(b.shaped, mtuBlksize, 1, nbp.Name, kern.Name), b.opt.stormTimeout)
				b.measureOnce(ctx, win, s, b.opt.stormRuns, b.tftpSteps(b.shaped, mtuBlksize, stormWindow, nbp.Name, kern.Name), b.opt.stormTimeout)
			}
		})
	}
	b.resolveSameAs()
}

func stormLabel(window int) string {
	if window <= 1 {
		return "lockstep"
	}
	return fmt.Sprintf("windowsize %d", window)
}

func (b *bench) case4(ctx context.Context) {
	f := b.files["loss.img"]
	limit := tftpLimitSeconds(f.Size, mtuBlksize, linkMTU, b.opt.rateBps)
	defer func() { _ = b.shaped.SetLoss(context.Background(), 0) }()
	for round := 0; round < b.opt.lossRuns; round++ {
		for _, spec := range b.tftpSpecs() {
			b.withServer(ctx, 4, spec, b.shaped, false, func(s *server) {
				if round == 0 {
					b.probeInto(ctx, 4, s, mtuBlksize, lossWindow)
				}
				for _, pct := range []int{1, 5} {
					m := b.figure(4, "shaped", fmt.Sprintf("%d%% loss", pct), spec.name, 1, f.Size, limit)
					if err := b.shaped.SetLoss(ctx, pct); err != nil {
						b.note("case 4: %v", err)
						return
					}
					b.measureOnce(ctx, m, s, b.opt.lossRuns, b.tftpSteps(b.shaped, mtuBlksize, lossWindow, f.Name), lossDeadline)
					_ = b.shaped.SetLoss(ctx, 0)
				}
			})
		}
	}
}

func (b *bench) case5(ctx context.Context) {
	big, conc := b.files["big.img"], b.files["conc.img"]
	n := b.opt.clients
	for round := 0; round < b.opt.runs; round++ {
		for _, t := range []*harness.Net{b.shaped, b.loop} {
			for _, spec := range b.httpSpecs() {
				b.withServer(ctx, 5, spec, t, true, func(s *server) {
					var l1, ln float64
					if t.RateBps > 0 {
						l1 = tcpLimitSeconds(big.Size, t.MTU, t.RateBps)
						ln = float64(n) * tcpLimitSeconds(conc.Size, t.MTU, t.RateBps)
					}
					m := b.figure(5, t.Name, "one transfer", spec.name, 1, big.Size, l1)
					b.measureOnce(ctx, m, s, b.opt.runs, b.httpSteps(s, big.Name), 60*time.Second)
					m = b.figure(5, t.Name, fmt.Sprintf("%d concurrent", n), spec.name, n, int64(n)*conc.Size, ln)
					b.measureOnce(ctx, m, s, b.opt.runs, b.httpSteps(s, conc.Name), b.opt.stormTimeout)
				})
			}
		}
	}
}

// probeInto records what s grants for the options; ok is false when the
// probe itself failed (then no figure is reused on its account).
func (b *bench) probeInto(ctx context.Context, c int, s *server, blksize, window int) (Probe, bool) {
	p, err := b.probe(ctx, s, blksize, window)
	if err != nil {
		if ctx.Err() == nil {
			b.note("case %d, %s: %v", c, s.spec.name, err)
		}
		return p, false
	}
	b.res.Probes = append(b.res.Probes, p)
	return p, true
}
