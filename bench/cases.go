package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Fixed parameters of the cases, from issue 3.
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
func (b *bench) startFor(ctx context.Context, c int, spec *serverSpec, t *Topology, asHTTP bool) *server {
	s, err := b.start(ctx, spec, t, asHTTP)
	if err != nil {
		if ctx.Err() == nil {
			b.note("case %d, %s, %s: not measured: %v", c, spec.name, t.Name, err)
		}
		return nil
	}
	cmd := shellJoin(s.argv)
	for i := range b.res.Servers {
		si := &b.res.Servers[i]
		if si.Name == spec.name && !contains(si.Cmds, cmd) {
			si.Cmds = append(si.Cmds, cmd)
		}
	}
	return s
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
func (b *bench) tftpSteps(t *Topology, blksize, window int, names ...string) func(int) []step {
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
		s += shellJoin(st.argv)
	}
	if clients > 1 {
		s = fmt.Sprintf("%d clients at once, each: %s", clients, s)
	}
	return s
}

// measure repeats a run n times into m. A single transfer that timed out
// is not repeated: the figure is already "did not finish in time".
func (b *bench) measure(ctx context.Context, m *Measurement, s *server, n int, steps func(int) []step, deadline time.Duration) {
	m.ServerCmd = shellJoin(s.argv)
	m.ClientCmd = clientCmd(steps, m.Clients)
	b.res.Meas = append(b.res.Meas, m)
	for r := 0; r < n && ctx.Err() == nil; r++ {
		cpu0, self0 := s.cpu(), selfCPU()
		busy0, total0 := machineCPU()
		cr := runClients(ctx, m.Clients, steps, deadline)
		if ctx.Err() != nil {
			return // interrupted: not a measurement
		}
		busy1, total1 := machineCPU()
		run := Run{Sec: cr.wall, OK: cr.failed == 0 && cr.timedOut == 0, Err: cr.firstErr,
			Failed: cr.failed, TimedOut: cr.timedOut, ServerCPU: s.cpu() - cpu0,
			ClientCPU: cr.cpu, HashCPU: selfCPU() - self0}
		if total1 > total0 {
			run.Busy = (busy1 - busy0) / (total1 - total0)
		}
		if m.Clients > 1 {
			run.PerClient = cr.perClient
		}
		m.Runs = append(m.Runs, run)
		b.log.Info("measured", "case", m.Case, "topo", m.Topo, "server", m.Server, "config", m.Label,
			"run", fmt.Sprintf("%d/%d", r+1, n), "sec", fmt.Sprintf("%.3f", run.Sec),
			"MB/s", fmt.Sprintf("%.1f", float64(m.Bytes)/run.Sec/1e6), "ok", run.OK,
			"server_cpu", fmt.Sprintf("%.2f", run.ServerCPU), "client_cpu", fmt.Sprintf("%.2f", run.ClientCPU),
			"busy", fmt.Sprintf("%.0f%%", run.Busy*100), "err", run.Err)
		if m.Clients == 1 && run.TimedOut > 0 {
			m.Note = fmt.Sprintf("timed out after %s; not repeated", deadline)
			return
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

func (b *bench) case1(ctx context.Context) {
	big := b.files["big.img"]
	limit := tftpLimitSeconds(big.Size, mtuBlksize, linkMTU, b.opt.rateBps)
	deadline := max(30*time.Second, time.Duration(15*limit*float64(time.Second)))
	cfgs := [][2]int{{mtuBlksize, 1}, {mtuBlksize, 4}, {mtuBlksize, 16}, {mtuBlksize, 64}, {bigBlksize, 4}, {bigBlksize, 64}}
	for _, spec := range b.tftpSpecs() {
		if ctx.Err() != nil {
			return
		}
		s := b.startFor(ctx, 1, spec, b.shaped, false)
		if s == nil {
			continue
		}
		// A server that ignores an option sends the same packets as for a
		// configuration already measured; that figure is reused, not re-run.
		seen := map[[2]int]*Measurement{}
		for _, cfg := range cfgs {
			m := &Measurement{Case: 1, Topo: "shaped", Label: cfgLabel(cfg[0], cfg[1]), Server: spec.name,
				Clients: 1, Bytes: big.Size, LimitSec: limit}
			p, ok := b.probeInto(ctx, 1, s, cfg[0], cfg[1])
			key := [2]int{p.GotBlksize, p.GotWindow}
			if prev := seen[key]; ok && prev != nil {
				m.SameAs, m.Runs, m.ServerCmd, m.ClientCmd = prev.Label, prev.Runs, prev.ServerCmd, prev.ClientCmd
				m.Note = fmt.Sprintf("OACK %q: same transfer as %s", p.OACK, prev.Label)
				b.res.Meas = append(b.res.Meas, m)
				continue
			}
			if ok {
				seen[key] = m
			}
			b.measure(ctx, m, s, b.opt.runs, b.tftpSteps(b.shaped, cfg[0], cfg[1], big.Name), deadline)
		}
		s.stop()
	}
}

func cfgLabel(blksize, window int) string {
	return fmt.Sprintf("blksize %d, windowsize %d", blksize, window)
}

func (b *bench) case2(ctx context.Context) {
	big, conc := b.files["big.img"], b.files["conc.img"]
	n := b.opt.clients
	for _, spec := range b.tftpSpecs() {
		if ctx.Err() != nil {
			return
		}
		s := b.startFor(ctx, 2, spec, b.loop, false)
		if s == nil {
			continue
		}
		b.probeInto(ctx, 2, s, mtuBlksize, concWindow)
		m := &Measurement{Case: 2, Topo: "loopback", Label: "one transfer", Server: spec.name, Clients: 1, Bytes: big.Size}
		b.measure(ctx, m, s, b.opt.runs, b.tftpSteps(b.loop, mtuBlksize, concWindow, big.Name), 60*time.Second)
		m = &Measurement{Case: 2, Topo: "loopback", Label: fmt.Sprintf("%d concurrent", n), Server: spec.name,
			Clients: n, Bytes: int64(n) * conc.Size}
		b.measure(ctx, m, s, b.opt.runs, b.tftpSteps(b.loop, mtuBlksize, concWindow, conc.Name), b.opt.stormTimeout)
		s.stop()
	}
}

func (b *bench) case3(ctx context.Context) {
	nbp, kern := b.files["nbp.efi"], b.files["kernel-initrd.img"]
	n := b.opt.clients
	limit := float64(n) * (tftpLimitSeconds(nbp.Size, mtuBlksize, linkMTU, b.opt.rateBps) +
		tftpLimitSeconds(kern.Size, mtuBlksize, linkMTU, b.opt.rateBps))
	for _, spec := range b.tftpSpecs() {
		if ctx.Err() != nil {
			return
		}
		s := b.startFor(ctx, 3, spec, b.shaped, false)
		if s == nil {
			continue
		}
		var lock *Measurement
		for _, w := range []int{1, stormWindow} {
			m := &Measurement{Case: 3, Topo: "shaped", Label: stormLabel(w), Server: spec.name,
				Clients: n, Bytes: int64(n) * (nbp.Size + kern.Size), LimitSec: limit}
			if w > 1 {
				if p, ok := b.probeInto(ctx, 3, s, mtuBlksize, w); ok && p.GotWindow <= 1 && lock != nil {
					m.SameAs, m.Runs, m.ServerCmd, m.ClientCmd = lock.Label, lock.Runs, lock.ServerCmd, lock.ClientCmd
					m.Note = fmt.Sprintf("OACK %q: windowsize not granted, same as lockstep", p.OACK)
					b.res.Meas = append(b.res.Meas, m)
					continue
				}
			}
			b.measure(ctx, m, s, b.opt.stormRuns, b.tftpSteps(b.shaped, mtuBlksize, w, nbp.Name, kern.Name), b.opt.stormTimeout)
			lock = m
		}
		s.stop()
	}
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
	defer func() { _ = b.shaped.setLoss(context.Background(), 0) }()
	for _, spec := range b.tftpSpecs() {
		if ctx.Err() != nil {
			return
		}
		s := b.startFor(ctx, 4, spec, b.shaped, false)
		if s == nil {
			continue
		}
		b.probeInto(ctx, 4, s, mtuBlksize, lossWindow)
		for _, pct := range []int{1, 5} {
			if err := b.shaped.setLoss(ctx, pct); err != nil {
				b.note("case 4: %v", err)
				break
			}
			m := &Measurement{Case: 4, Topo: "shaped", Label: fmt.Sprintf("%d%% loss", pct), Server: spec.name,
				Clients: 1, Bytes: f.Size, LimitSec: limit}
			b.measure(ctx, m, s, b.opt.lossRuns, b.tftpSteps(b.shaped, mtuBlksize, lossWindow, f.Name), lossDeadline)
			_ = b.shaped.setLoss(ctx, 0)
		}
		s.stop()
	}
}

func (b *bench) case5(ctx context.Context) {
	big, conc := b.files["big.img"], b.files["conc.img"]
	n := b.opt.clients
	for _, t := range []*Topology{b.shaped, b.loop} {
		for _, spec := range b.httpSpecs() {
			if ctx.Err() != nil {
				return
			}
			s := b.startFor(ctx, 5, spec, t, true)
			if s == nil {
				continue
			}
			var l1, ln float64
			if t.RateBps > 0 {
				l1 = tcpLimitSeconds(big.Size, t.MTU, t.RateBps)
				ln = float64(n) * tcpLimitSeconds(conc.Size, t.MTU, t.RateBps)
			}
			m := &Measurement{Case: 5, Topo: t.Name, Label: "one transfer", Server: spec.name, Clients: 1, Bytes: big.Size, LimitSec: l1}
			b.measure(ctx, m, s, b.opt.runs, b.httpSteps(s, big.Name), 60*time.Second)
			m = &Measurement{Case: 5, Topo: t.Name, Label: fmt.Sprintf("%d concurrent", n), Server: spec.name,
				Clients: n, Bytes: int64(n) * conc.Size, LimitSec: ln}
			b.measure(ctx, m, s, b.opt.runs, b.httpSteps(s, conc.Name), b.opt.stormTimeout)
			s.stop()
		}
	}
}
