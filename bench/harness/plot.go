package harness

import (
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// BarChart draws one bar per series in each group into path (PNG by the
// extension); vals[series][group], NaN for a missing figure. limit > 0 adds
// a dashed line at the physical limit.
func BarChart(path, title, unit string, groups, series []string, vals [][]float64, limit float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Legend.Top = true
	p.Legend.Padding = vg.Points(3)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	w := vg.Points(float64(min(14, 120/max(1, len(series)))))
	top := 0.0
	for i, s := range series {
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
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
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

// CDF draws, for each named series of completion times, the fraction of
// clients done against seconds; dashed(name) draws that series dashed.
func CDF(path, title string, names []string, series map[string][]float64, dashed func(string) bool) error {
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
		if dashed != nil && dashed(n) {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(n, l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
