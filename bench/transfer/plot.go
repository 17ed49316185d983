package transfer

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// writePlots draws the bar charts of cases 1, 2, 4 and 5 and the storm CDF
// into dir; it returns plot key → file name for the ones it drew.
func writePlots(r *Results, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range []struct {
		key   string
		cs    int
		title string
	}{
		{"case1", 1, "Case 1: one transfer at " + r.Rate + " (MB/s)"},
		{"case2", 2, "Case 2: loopback (MB/s)"},
		{"case4", 4, "Case 4: loss (MB/s)"},
		{"case5", 5, "Case 5: HTTP (MB/s)"},
	} {
		servers, rows := r.serversIn(c.cs), r.labelsIn(c.cs)
		if len(servers) == 0 {
			continue
		}
		var groups []string
		vals := make([][]float64, len(servers))
		for _, row := range rows {
			g := row[1]
			if c.cs == 5 {
				g = row[0] + ", " + row[1]
			}
			groups = append(groups, g)
			for i, s := range servers {
				v := 0.0
				if m := r.find(c.cs, row[0], row[1], s); !bad(m) {
					v = m.MBps()
				}
				vals[i] = append(vals[i], v)
			}
		}
		name := c.key + ".png"
		limit := 0.0
		if c.cs == 1 {
			for _, m := range r.Meas {
				if m.Case == 1 && m.LimitSec > 0 {
					limit = float64(m.Bytes) / m.LimitSec / 1e6
				}
			}
		}
		if err := harness.BarChart(filepath.Join(dir, name), c.title, "MB/s", groups, servers, vals, limit); err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		out[c.key] = name
	}
	series := map[string][]float64{}
	var names []string
	for _, m := range r.Meas {
		if m.Case != 3 || m.SameAs != "" || len(m.Runs) == 0 {
			continue
		}
		n := m.Server + ", " + m.Label
		series[n] = medianRun(m).PerClient
		names = append(names, n)
	}
	if len(names) > 0 {
		if err := harness.CDF(filepath.Join(dir, "storm.png"), fmt.Sprintf("Case 3: boot storm, %d clients: share of clients done", r.Clients), names, series,
			func(n string) bool { return strings.Contains(n, "windowsize") }); err != nil { // windowed storms dashed, lockstep solid
			return out, fmt.Errorf("storm.png: %w", err)
		}
		out["storm"] = "storm.png"
	}
	return out, nil
}
