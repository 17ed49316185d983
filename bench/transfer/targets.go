package transfer

import (
	"fmt"
	"math"
	"strings"
)

// target is one line of the performance targets with what this run measured.
type target struct {
	Name     string
	Measured string
	Status   string // "met", "not met" or "not measured"
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

const notMeasured = "not measured"

// bad reports whether m is missing or has no successful run.
func bad(m *Measurement) bool { return m == nil || math.IsNaN(m.Sec()) }

// bestPeer is the fastest peer for case/topo/label among servers other
// than bootfleet, by median MB/s.
func (r *Results) bestPeer(c int, topo, label string) *Measurement {
	var best *Measurement
	for _, m := range r.Meas {
		if m.Case != c || m.Topo != topo || m.Label != label || m.Server == "bootfleet" || bad(m) {
			continue
		}
		if best == nil || m.MBps() > best.MBps() {
			best = m
		}
	}
	return best
}

// targets evaluates the performance targets against r. Values are medians; a
// target counts as met only on a strict reading, with no noise allowance.
func (r *Results) targets(clients int) []target {
	var ts []target
	bf := func(c int, topo, label string) *Measurement { return r.find(c, topo, label, "bootfleet") }

	{
		t := target{Name: "Case 1, windowsize 64: at least 95% of the physical limit", Status: notMeasured}
		if m := bf(1, "shaped", cfgLabel(mtuBlksize, 64)); !bad(m) {
			t.Measured = fmt.Sprintf("%.2f s = %.0f%% of the %.2f s limit (95%%: ≤ %.2f s)", m.Sec(), 100*m.OfLimit(), m.LimitSec, m.LimitSec/0.95)
			t.Status = status(m.OfLimit() >= 0.95)
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 1, lockstep: at most 0.8× the dnsmasq time", Status: notMeasured}
		m, d := bf(1, "shaped", cfgLabel(mtuBlksize, 1)), r.find(1, "shaped", cfgLabel(mtuBlksize, 1), "dnsmasq")
		if !bad(m) && !bad(d) {
			t.Measured = fmt.Sprintf("%.2f s vs dnsmasq %.2f s = %.2f×", m.Sec(), d.Sec(), m.Sec()/d.Sec())
			t.Status = status(m.Sec() <= 0.8*d.Sec())
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 1, blksize 8192: no collapse, within 1.3× of the blksize 1456 time", Status: notMeasured}
		var parts []string
		all, any := true, false
		for _, w := range []int{4, 64} {
			big, small := bf(1, "shaped", cfgLabel(bigBlksize, w)), bf(1, "shaped", cfgLabel(mtuBlksize, w))
			switch {
			case big == nil || bad(small):
				continue
			case bad(big):
				parts = append(parts, fmt.Sprintf("windowsize %d: failed (%s)", w, big.Failures()))
				all, any = false, true
			default:
				q := big.Sec() / small.Sec()
				parts = append(parts, fmt.Sprintf("windowsize %d: %.2f s vs %.2f s = %.2f×", w, big.Sec(), small.Sec(), q))
				all, any = all && q <= 1.3, true
			}
		}
		if any {
			t.Measured, t.Status = strings.Join(parts, "; "), status(all)
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 2: bootfleet ahead of every peer (loopback)", Status: notMeasured}
		var parts []string
		all, any := true, false
		for _, label := range []string{"one transfer", fmt.Sprintf("%d concurrent", clients)} {
			m, p := bf(2, "loopback", label), r.bestPeer(2, "loopback", label)
			if bad(m) || p == nil {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s: %.0f MB/s vs %s %.0f MB/s", label, m.MBps(), p.Server, p.MBps()))
			all, any = all && m.MBps() > p.MBps(), true
		}
		if any {
			t.Measured, t.Status = strings.Join(parts, "; "), status(all)
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 3: aggregate at least 90% of the link, no client timing out", Status: notMeasured}
		var parts []string
		all, any := true, false
		for _, label := range []string{stormLabel(1), stormLabel(stormWindow)} {
			m := bf(3, "shaped", label)
			if m == nil || len(m.Runs) == 0 {
				continue
			}
			worst := m.Runs[0]
			for _, run := range m.Runs {
				if run.TimedOut+run.Failed > worst.TimedOut+worst.Failed {
					worst = run
				}
			}
			frac := m.LimitSec / worstSec(m)
			parts = append(parts, fmt.Sprintf("%s: %.0f%% of the link, %d timed out, %d failed", label, 100*frac, worst.TimedOut, worst.Failed))
			all, any = all && frac >= 0.9 && worst.TimedOut == 0 && worst.Failed == 0, true
		}
		if any {
			t.Measured, t.Status = strings.Join(parts, "; "), status(all)
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 4: every transfer under 1% and 5% loss completes byte-identical", Status: notMeasured}
		var parts []string
		all, any := true, false
		for _, pct := range []int{1, 5} {
			m := bf(4, "shaped", fmt.Sprintf("%d%% loss", pct))
			if m == nil || len(m.Runs) == 0 {
				continue
			}
			if f := m.Failures(); f != "" {
				parts = append(parts, fmt.Sprintf("%d%%: %s", pct, f))
				all = false
			} else {
				parts = append(parts, fmt.Sprintf("%d%%: %d/%d ok, %.1f MB/s", pct, len(m.Runs), len(m.Runs), m.MBps()))
			}
			any = true
		}
		if any {
			t.Measured, t.Status = strings.Join(parts, "; "), status(all)
		}
		ts = append(ts, t)
	}
	{
		t := target{Name: "Case 5: HTTP at least equal to nginx", Status: notMeasured}
		var parts []string
		all, any := true, false
		for _, topo := range []string{"shaped", "loopback"} {
			for _, label := range []string{"one transfer", fmt.Sprintf("%d concurrent", clients)} {
				m, n := bf(5, topo, label), r.find(5, topo, label, "nginx")
				if bad(m) || bad(n) {
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %s: %.0f vs %.0f MB/s", topo, label, m.MBps(), n.MBps()))
				all, any = all && m.MBps() >= n.MBps(), true
			}
		}
		if any {
			t.Measured, t.Status = strings.Join(parts, "; "), status(all)
		}
		ts = append(ts, t)
	}
	return ts
}

// worstSec is the slowest run's time; a storm target must hold every time.
func worstSec(m *Measurement) float64 {
	w := 0.0
	for _, r := range m.Runs {
		w = max(w, r.Sec)
	}
	return w
}
