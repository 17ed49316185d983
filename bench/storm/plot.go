package storm

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// seedLab is the table of the 200-PC lab that the project started from
// (shared/background/002): PCs booting together and the seconds until the
// last was up, NFS root on a server link that ran at about 100 Mbit/s.
var seedLab = plotter.XYs{{X: 1, Y: 30}, {X: 2, Y: 39}, {X: 5, Y: 93}, {X: 10, Y: 110}, {X: 20, Y: 345}, {X: 40, Y: 680}}

// plots are the PNG files writePlots draws, by what they show.
type plots struct {
	booted  string // machines booted against time at the largest N
	scaling string // time to all booted against N
}

// writePlots draws both plots into dir and returns their file names; a plot
// with nothing to draw is left out.
func (r *report) writePlots(dir string) (plots, error) {
	var out plots
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, err
	}
	top := r.Opts.clients[len(r.Opts.clients)-1]
	// Named after the report, so that the desktop trace's report does not
	// draw over the Debian trace's plots.
	prefix := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(r.Opts.out), "BENCHMARKS-"), ".md"))
	name := prefix + "-booted.png"
	ok, err := r.drawBooted(filepath.Join(dir, name), top)
	if err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	if ok {
		out.booted = name
	}
	name = prefix + "-scaling.png"
	if ok, err = r.drawScaling(filepath.Join(dir, name)); err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	if ok {
		out.scaling = name
	}
	return out, nil
}

// medianRun is the run of stack, fw and n whose wall time is the median,
// the one the tables quote.
func (r *report) medianRun(stack, fw string, n int) *run {
	var rs []run
	for _, x := range r.Runs {
		if x.Stack == stack && x.Firmware == fw && x.N == n && x.Report != nil {
			rs = append(rs, x)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return wallOf(rs[i]) < wallOf(rs[j]) })
	return &rs[(len(rs)-1)/2]
}

// bootTimes are the seconds from the run's start until each machine that
// booted called its DoneURL, in order.
func (x *run) bootTimes() []float64 {
	var done []float64
	for _, m := range x.Report.Machines {
		if m.Result == "ok" {
			done = append(done, m.PowerOn+m.Boot)
		}
	}
	sort.Float64s(done)
	return done
}

// style gives every stack and firmware the same colour and dash in both
// plots: one colour per stack, ipxe dashed.
func style(stacks []string, stack, fw string) draw.LineStyle {
	ls := draw.LineStyle{Color: plotutil.Color(max(0, slices.Index(stacks, stack))), Width: vg.Points(1.5)}
	if fw == "ipxe" {
		ls.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return ls
}

func limitStyle() draw.LineStyle {
	return draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
}

// drawBooted plots, for each stack and firmware, how many of the n machines
// had called their DoneURL at each moment, beside the link limit: the
// machines the link could have booted by then.
func (r *report) drawBooted(path string, n int) (bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d machines powered on at once: machines booted", n)
	p.X.Label.Text = "seconds since power-on"
	p.Y.Label.Text = "machines booted"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	drawn := false
	for _, fw := range r.Opts.firmwares {
		for _, st := range r.Opts.stacks {
			x := r.medianRun(st, fw, n)
			if x == nil {
				continue
			}
			pts := plotter.XYs{{X: 0, Y: 0}}
			for i, t := range x.bootTimes() {
				pts = append(pts, plotter.XY{X: t, Y: float64(i)}, plotter.XY{X: t, Y: float64(i + 1)})
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return false, err
			}
			l.LineStyle = style(r.Opts.stacks, st, fw)
			p.Add(l)
			label := fmt.Sprintf("%s, %s", st, fw)
			if f := x.Report.Summary.Failed + x.Report.Summary.Pending; f > 0 {
				label += fmt.Sprintf(" (%d failed)", f)
			}
			p.Legend.Add(label, l)
			drawn = true
		}
		if lim := r.limit(fw, n); drawn && !math.IsNaN(lim) && fw == r.Opts.firmwares[0] {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: lim, Y: float64(n)}})
			if err != nil {
				return false, err
			}
			l.LineStyle = limitStyle()
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("link limit (%s)", fw), l)
		}
	}
	if !drawn {
		return false, nil
	}
	p.Y.Min, p.Y.Max = 0, float64(n)*1.35 // room for the legend
	p.Y.Tick.Marker = countTicks{}
	p.X.Min = 0
	return true, p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// drawScaling plots the seconds until every machine had booted against N,
// each stack and firmware beside the link limit and the seed lab's table,
// on log axes so that 1 and 200 machines both show. A storm in which some
// machine failed never had every machine booted and is left out.
func (r *report) drawScaling(path string) (bool, error) {
	p := plot.New()
	p.Title.Text = "Time until every machine booted"
	p.X.Label.Text = "machines powered on together"
	p.Y.Label.Text = "seconds"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	add := func(pts plotter.XYs, ls draw.LineStyle, label string) error {
		if len(pts) == 0 {
			return nil
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.LineStyle = ls
		s.Color = ls.Color
		p.Add(l, s)
		p.Legend.Add(label, l, s)
		return nil
	}
	drawn := false
	for _, fw := range r.Opts.firmwares {
		for _, st := range r.Opts.stacks {
			var pts plotter.XYs
			for _, n := range r.Opts.clients {
				if x := r.row(st, fw, n); x != nil && x.failed == 0 && x.wall > 0 {
					pts = append(pts, plotter.XY{X: float64(n), Y: x.wall})
				}
			}
			if err := add(pts, style(r.Opts.stacks, st, fw), fmt.Sprintf("%s, %s", st, fw)); err != nil {
				return false, err
			}
			drawn = drawn || len(pts) > 0
		}
	}
	if !drawn {
		return false, nil
	}
	var lim plotter.XYs
	for _, n := range r.Opts.clients {
		if v := r.limit(r.Opts.firmwares[0], n); !math.IsNaN(v) && v > 0 {
			lim = append(lim, plotter.XY{X: float64(n), Y: v})
		}
	}
	if err := add(lim, limitStyle(), fmt.Sprintf("link limit (%s)", r.Opts.firmwares[0])); err != nil {
		return false, err
	}
	seed := draw.LineStyle{Color: color.RGBA{R: 150, G: 90, B: 20, A: 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(1), vg.Points(3)}}
	if err := add(seedLab, seed, "the 200-PC lab's table (NFS root, its own hardware)"); err != nil {
		return false, err
	}
	return true, p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// countTicks marks whole numbers of machines, at most about eight.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000} {
		if step = s; (hi-lo)/s <= 8 {
			break
		}
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%.0f", v)})
	}
	return ts
}
