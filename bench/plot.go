package main

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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
		if err := barChart(filepath.Join(dir, name), c.title, groups, servers, vals, limit); err != nil {
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
		if err := cdf(filepath.Join(dir, "storm.png"), fmt.Sprintf("Case 3: boot storm, %d clients: share of clients done", r.Clients), names, series); err != nil {
			return out, fmt.Errorf("storm.png: %w", err)
		}
		out["storm"] = "storm.png"
	}
	return out, nil
}

// barChart draws one bar per server in each group; limit > 0 adds a dashed
// line at the physical limit.
func barChart(path, title string, groups, servers []string, vals [][]float64, limit float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "MB/s"
	p.Legend.Top = true
	p.Legend.Padding = vg.Points(3)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	w := vg.Points(float64(min(14, 120/max(1, len(servers)))))
	top := 0.0
	for i, s := range servers {
		v := make(plotter.Values, len(vals[i]))
		for j, x := range vals[i] {
			if !math.IsNaN(x) {
				v[j] = x
				top = max(top, x)
			}
		}
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(servers)-1)/2)
		p.Add(bars)
		p.Legend.Add(s, bars)
	}
	if limit > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: limit}, {X: float64(len(groups)) - 0.5, Y: limit}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("physical limit", l)
		top = max(top, limit)
	}
	// Headroom for the legend, which sits top right.
	p.Y.Min, p.Y.Max = 0, top*1.45
	p.NominalX(groups...)
	p.X.Tick.Label.Rotation = 0.35
	p.X.Tick.Label.XAlign = -0.9
	width := vg.Length(max(6, 1.2*float64(len(groups)))) * vg.Inch
	return p.Save(width, 4*vg.Inch, path)
}

func cdf(path, title string, names []string, series map[string][]float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the storm started"
	p.Y.Label.Text = "clients done (fraction)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Add(plotter.NewGrid())
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1.3
	for i, n := range names {
		xs := append([]float64(nil), series[n]...)
		sort.Float64s(xs)
		pts := make(plotter.XYs, len(xs))
		for j, x := range xs {
			pts[j] = plotter.XY{X: x, Y: float64(j+1) / float64(len(xs))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		if strings.Contains(n, "windowsize") { // windowed storms dashed, lockstep solid
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(n, l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
