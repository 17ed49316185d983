package nbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// The layered A/B (`bench nbd ab -layers N`) asks whether serving an image
// version stored as N delta layers over its base costs more on the NBD
// read path than serving the same bytes stored whole. One bootfleet server
// holds both: image "deep", imported N+1 times, each import rewriting a
// different eighth of the 64 KiB blocks (so a read finds its block in any
// layer or falls through all of them to the base), and image "flat", the
// last of those files imported once. Each machine reads its image through
// an ephemeral overlay it never writes, as a lab machine does. Each round
// reads both exports, in turn and starting with a different one: the whole
// export with nbdcopy (MB/s), then fio's 4 KiB random reads (IOPS), with
// the server's CPU time for each run.

const (
	layerBlock = 64 << 10 // bootfleet's layer block: a changed block is stored whole
	layerShare = 8        // each layer rewrites one block in layerShare
)

// layerMACs are the two machines: the deep image's, the flat image's.
var layerMACs = map[string]string{"deep": "52:54:00:ab:01:01", "flat": "52:54:00:ab:01:02"}

// layerRun is one client run against one export.
type layerRun struct {
	value, serverCPU float64 // MB/s or IOPS; CPU seconds of the server over the run
	units            float64 // GB moved or operations done, for CPU per unit
}

func runLayers(ctx context.Context, log *slog.Logger, o abOptions, out io.Writer) error {
	if o.layers >= layerShare {
		return fmt.Errorf("-layers %d: at most %d (each layer rewrites its own eighth of the blocks)", o.layers, layerShare-1)
	}
	w, err := os.MkdirTemp(o.dir, "bf-layers.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(w)
	v := o.variants[0]
	kernel, ipxe, err := standIns(w)
	if err != nil {
		return err
	}
	cfg := bfConfig{data: filepath.Join(w, "data"), ipxe: ipxe, httpPort: 11001, nbdPort: 11000,
		profiles: []profile{{"deep", kernel, "deep", "ephemeral"}, {"flat", kernel, "flat", "ephemeral"}},
		machines: []machine{{layerMACs["deep"], "deep", "deep"}, {layerMACs["flat"], "flat", "flat"}}}
	bf, err := startBootfleet("nbd-layers", absBinary(v.bin), filepath.Join(w, "bf.yaml"), filepath.Join(w, "bf.log"), v.env, cfg)
	if err != nil {
		return err
	}
	defer bf.proc.Stop()
	final, err := importLayers(ctx, bf, w, o.layers)
	if err != nil {
		return err
	}
	uris := map[string]string{}
	keys := []string{"flat", "deep"}
	for _, k := range keys {
		if uris[k], err = bf.export(layerMACs[k]); err != nil {
			return err
		}
		// Also warms the page cache with every file both read.
		if err := sameExport(ctx, uris[k], final); err != nil {
			return err
		}
	}
	log.Info("exports hold the same bytes", "deep", uris["deep"], "flat", uris["flat"])

	got := map[string][]layerRun{}
	for r := 1; r <= o.rounds; r++ {
		var line []string
		for _, c := range []string{"seq", "rr"} {
			for _, k := range harness.Rotate(keys, r) {
				unix.Sync()
				run := layerClient(ctx, o, bf, c, uris[k])
				got[c+"/"+k] = append(got[c+"/"+k], run)
				line = append(line, fmt.Sprintf("%s %s %.0f", c, k, run.value))
			}
		}
		fmt.Fprintf(out, "== round %d/%d: %s\n", r, o.rounds, strings.Join(line, "  "))
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	fmt.Fprint(out, layersSummary(got))
	return nil
}

// importLayers imports image "deep" as a base and n versions over it, each
// rewriting its own eighth of the blocks, checks that each was stored as a
// layer, and imports the last file as image "flat". It returns that file.
func importLayers(ctx context.Context, bf *bootfleet, dir string, n int) (string, error) {
	cur := filepath.Join(dir, "v1.img")
	if err := randomFile(cur, imgBytes); err != nil {
		return "", err
	}
	importLog := filepath.Join(dir, "import.log")
	if err := bf.importImage(ctx, "deep", cur, importLog); err != nil {
		return "", err
	}
	for i := 1; i <= n; i++ {
		next := filepath.Join(dir, fmt.Sprintf("v%d.img", i+1))
		if err := os.Rename(cur, next); err != nil {
			return "", err
		}
		cur = next
		if err := rewriteBlocks(cur, i-1); err != nil {
			return "", err
		}
		if err := bf.importImage(ctx, "deep", cur, importLog); err != nil {
			return "", err
		}
	}
	vs, err := bf.versions(ctx, "deep")
	if err != nil {
		return "", err
	}
	if len(vs) != n+1 || !vs[n].Current {
		return "", fmt.Errorf("image deep has versions %+v, want %d with the last current", vs, n+1)
	}
	for i, v := range vs[1:] {
		if v.Parent != i+1 || v.Stored >= imgBytes/2 {
			return "", fmt.Errorf("image deep version %d: parent %d, %d bytes stored; want a layer over version %d (was it merged? nbd.merge_depth must exceed %d)",
				v.Version, v.Parent, v.Stored, i+1, n)
		}
	}
	if err := bf.importImage(ctx, "flat", cur, importLog); err != nil {
		return "", err
	}
	return cur, nil
}

// rewriteBlocks overwrites with random bytes every block of path whose
// index is share modulo layerShare.
func rewriteBlocks(path string, share int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, layerBlock)
	for off := int64(share) * layerBlock; off < imgBytes; off += layerShare * layerBlock {
		if _, err := rand.Read(buf); err != nil {
			f.Close()
			return err
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// layerVersion is what the bench reads of `image versions -o json`.
type layerVersion struct {
	Version int   `json:"version"`
	Parent  int   `json:"parent"`
	Current bool  `json:"current"`
	Stored  int64 `json:"stored"`
}

func (b *bootfleet) versions(ctx context.Context, name string) ([]layerVersion, error) {
	out, err := exec.CommandContext(ctx, b.bin, "image", "versions", "--server", b.url(""), "--data", b.cfg.data, name, "-o", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("bootfleet image versions %s: %w", name, err)
	}
	var vs []layerVersion
	if err := json.Unmarshal(out, &vs); err != nil {
		return nil, fmt.Errorf("bootfleet image versions %s -o json: %w", name, err)
	}
	return vs, nil
}

// layerClient runs case c ("seq": nbdcopy of the whole export; "rr": fio
// random read) against uri; a failed run is NaN.
func layerClient(ctx context.Context, o abOptions, bf *bootfleet, c, uri string) layerRun {
	nan := layerRun{math.NaN(), math.NaN(), math.NaN()}
	c0 := bf.proc.CPU()
	if c == "seq" {
		t0 := time.Now()
		if _, err := client(ctx, []string{"nbdcopy", uri, "null:"}, io.Discard); err != nil {
			return nan
		}
		return layerRun{imgBytes / time.Since(t0).Seconds() / 1e6, bf.proc.CPU() - c0, imgBytes / 1e9}
	}
	var stdout bytes.Buffer
	if _, err := client(ctx, append(layerFio(o), "--uri="+uri), &stdout); err != nil {
		return nan
	}
	r, err := parseTerse(stdout.String())
	if err != nil {
		return nan
	}
	iops, err := r.iops(false)
	if err != nil {
		return nan
	}
	return layerRun{iops, bf.proc.CPU() - c0, iops * float64(o.runtime+1)}
}

func layerFio(o abOptions) []string {
	return []string{"fio", "--ioengine=nbd", "--bs=4k", "--iodepth=32", "--numjobs=1", "--ramp_time=1",
		fmt.Sprintf("--runtime=%d", o.runtime), "--time_based", "--output-format=terse", "--name=layers", "--rw=randread"}
}

// layersSummary is, for each case, both exports' medians (throughput and
// server CPU per unit) and deep over flat round by round.
func layersSummary(got map[string][]layerRun) string {
	var w strings.Builder
	for _, c := range []struct{ key, what, unit, cpuUnit string }{
		{"seq", "sequential read of the whole export (nbdcopy)", "MB/s", "s/GB"},
		{"rr", "4 KiB random read, queue depth 32 (fio)", "IOPS", "µs/op"},
	} {
		fmt.Fprintf(&w, "%s:\n", c.what)
		perUnit := map[string][]float64{}
		for _, k := range []string{"flat", "deep"} {
			var vals, runs []string
			var xs []float64
			for _, r := range got[c.key+"/"+k] {
				runs = append(runs, fmt.Sprintf("%.0f", r.value))
				if math.IsNaN(r.value) {
					continue
				}
				xs = append(xs, r.value)
				cpu := r.serverCPU / r.units
				if c.key == "rr" {
					cpu *= 1e6
				}
				perUnit[k] = append(perUnit[k], cpu)
			}
			vals = append(vals, fmt.Sprintf("median %.0f %s", harness.Median(xs), c.unit),
				fmt.Sprintf("server CPU %.3g %s", harness.Median(perUnit[k]), c.cpuUnit))
			fmt.Fprintf(&w, "  %-4s %s  runs: %s\n", k, strings.Join(vals, ", "), strings.Join(runs, " "))
		}
		var pairs, cpuPairs [][2]float64
		for i, d := range got[c.key+"/deep"] {
			if i < len(got[c.key+"/flat"]) {
				f := got[c.key+"/flat"][i]
				pairs = append(pairs, [2]float64{d.value, f.value})
				cpuPairs = append(cpuPairs, [2]float64{d.serverCPU / d.units, f.serverCPU / f.units})
			}
		}
		v, cv := harness.Compare(pairs), harness.Compare(cpuPairs)
		fmt.Fprintf(&w, "  deep over flat, round by round: %s median %.3f, ahead in %d of %d (sign test p = %.2f); server CPU per unit median %.3f, more in %d of %d (p = %.2f)\n",
			c.unit, v.Ratio, v.Wins, v.N, v.P, cv.Ratio, cv.Wins, cv.N, cv.P)
	}
	return w.String()
}

// The layered A/B section of BENCHMARKS-nbd.md lies between these markers:
// `bench nbd ab -layers N -report` replaces it, and a full run keeps it.
const (
	layersBegin = "<!-- written by bench nbd ab -layers: begin -->"
	layersEnd   = "<!-- written by bench nbd ab -layers: end -->"
)

// layersMain runs the layered A/B, its output on stdout and, with -report,
// in the report's section.
func layersMain(ctx context.Context, log *slog.Logger, o abOptions) error {
	host := harness.DescribeHost(ctx) // before the report is rewritten and the tree looks dirty
	var out bytes.Buffer
	t0 := time.Now()
	if err := runLayers(ctx, log, o, io.MultiWriter(os.Stdout, &out)); err != nil {
		return err
	}
	if o.report == "" {
		return nil
	}
	md, err := os.ReadFile(o.report)
	if err != nil {
		return fmt.Errorf("-report: %w", err)
	}
	sec := layersSection(o, host, harness.LoadAvg(), time.Since(t0), out.String())
	return os.WriteFile(o.report, []byte(harness.WithSection(string(md), layersBegin, layersEnd, sec)), 0o644)
}

// layersSection is the report's section for one layered A/B run.
func layersSection(o abOptions, host harness.Host, loadAfter string, took time.Duration, out string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "%s\n## Image versions: a version %d layers deep against the same bytes flat\n\n", layersBegin, o.layers)
	fmt.Fprintf(&w, "Written by `bin/bench nbd ab -layers %d -rounds %d -runtime %d -dir %s -report %s` on %s in %.0f s (kept by full runs).\n",
		o.layers, o.rounds, o.runtime, o.dir, o.report, host.Date, took.Seconds())
	fmt.Fprintf(&w, "Machine: %d CPUs (%s), shared with other work; load average before: %s, after: %s. bootfleet %s.\n\n",
		host.CPUs, host.CPU, host.Load, loadAfter, host.Version)
	fmt.Fprintf(&w, "One server serves image `deep`, a %d MiB file of random bytes imported %d times over, each import rewriting "+
		"its own eighth of the 64 KiB blocks (so version %d is its base plus %d delta layers, and a read finds its block in "+
		"any of them or falls through all of them to the base), and image `flat`, the last file imported once. Both exports "+
		"were compared byte for byte with that file before timing. Each machine reads through an ephemeral overlay it never "+
		"writes. Each round runs nbdcopy `URI null:` (the whole export) and fio's 4 KiB random read (one connection, queue "+
		"depth 32, 1 s ramp then %d s) on each, in turn and starting with a different one; server CPU is the server's "+
		"user+system time over each run, per GB or per operation. Deep over flat is the median of the round-by-round "+
		"ratios, with a two-sided sign test (p >= 0.05: not told apart from a tie).\n\n",
		imgBytes>>20, o.layers+1, o.layers+1, o.layers, o.runtime)
	fmt.Fprintf(&w, "```\n%s```\n%s", out, layersEnd)
	return w.String()
}
