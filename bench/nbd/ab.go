package nbd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// The A/B mode compares bootfleet builds (or settings, through environment
// variables) on fio's 4 KiB random I/O, interleaved with nbdkit, to try a
// change to the NBD path before running the whole bench, whose figures are
// the ones of record. Every variant is its own bootfleet server with one
// persistent machine on the same 512 MiB image, its overlay filled first so
// that no run pays for allocating blocks; nbdkit serves a copy of the
// image. Each round runs every server once, starting with a different one,
// after an untimed sync. About 6 s per server per round.

const abNamespace = "bf-nbdab"

type abOptions struct {
	rounds, runtime int
	rw, dir         string
	variants        []variant
	layers          int    // >0: the layered A/B of layers.go
	report          string // the report whose A/B section the layered A/B replaces
}

// variant is one bootfleet binary and the environment it runs with.
type variant struct {
	name, bin string
	env       []string
}

// parseVariant reads NAME=BINARY[,VAR=VALUE...].
func parseVariant(s string) (variant, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" || strings.ContainsAny(name, "/ ") {
		return variant{}, fmt.Errorf("variant %q: want NAME=BINARY[,VAR=VALUE...], e.g. head=/tmp/head/bootfleet", s)
	}
	f := strings.Split(rest, ",")
	v := variant{name: name, bin: f[0]}
	for _, e := range f[1:] {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return variant{}, fmt.Errorf("variant %s: %q is not VAR=VALUE", name, e)
		}
		v.env = append(v.env, e)
	}
	return v, nil
}

func parseABFlags(args []string) (abOptions, error) {
	var o abOptions
	fs := flag.NewFlagSet("nbd ab", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bench nbd ab [flags] NAME=BINARY[,VAR=VALUE...] ...\n  e.g. bench nbd ab head=/tmp/head/bootfleet new=bin/bootfleet\n"+
			"   or: bench nbd ab -layers 3 [-report BENCHMARKS-nbd.md] [NAME=BINARY]  (a version 3 layers deep against the same bytes flat)")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.rounds, "rounds", 6, "rounds; each runs every server once")
	fs.IntVar(&o.runtime, "runtime", 4, "seconds per fio run, after a 1 s ramp")
	fs.StringVar(&o.rw, "rw", "randwrite", "fio's --rw: randwrite or randread")
	fs.StringVar(&o.dir, "dir", "/var/tmp", "directory for the images and overlays (/var/tmp is on the disk; /dev/shm for tmpfs)")
	fs.IntVar(&o.layers, "layers", 0, "instead of builds against nbdkit: one build's reads of a version this many layers deep against the same bytes stored flat (1 to 7; -rw is not used)")
	fs.StringVar(&o.report, "report", "", "with -layers: also write the results as the layered A/B section of this report (BENCHMARKS-nbd.md), replacing the one there")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.rounds < 1 || o.runtime < 1 {
		return o, errors.New("-rounds and -runtime must be at least 1")
	}
	if o.layers < 0 {
		return o, errors.New("-layers must be at least 1, or 0 for the A/B of builds")
	}
	if o.report != "" && o.layers == 0 {
		return o, errors.New("-report writes only the layered A/B: add -layers 3")
	}
	if o.layers > 0 && fs.NArg() > 1 {
		return o, fmt.Errorf("-layers compares one build with itself; got %d builds, want at most one NAME=BINARY", fs.NArg())
	}
	if o.layers > 0 && fs.NArg() == 0 {
		o.variants = []variant{{name: "bootfleet", bin: "bin/bootfleet"}}
		return o, nil
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return o, errors.New("want at least one NAME=BINARY")
	}
	for _, a := range fs.Args() {
		v, err := parseVariant(a)
		if err != nil {
			return o, err
		}
		if v.name == "nbdkit" || slices.ContainsFunc(o.variants, func(w variant) bool { return w.name == v.name }) {
			return o, fmt.Errorf("variant name %q is taken; give each variant its own name", v.name)
		}
		o.variants = append(o.variants, v)
	}
	return o, nil
}

func abMain(ctx context.Context, log *slog.Logger, args []string) error {
	o, err := parseABFlags(args)
	if err != nil {
		return err
	}
	if os.Getenv(nsEnv) == "" {
		for _, v := range o.variants {
			if st, err := os.Stat(v.bin); err != nil || st.Mode()&0o111 == 0 {
				return fmt.Errorf("%s (variant %s) is not an executable", v.bin, v.name)
			}
		}
		if err := checkTools(ctx, "fio"); err != nil {
			return err
		}
		return reexec(ctx, abNamespace, append([]string{"nbd", "ab"}, args...))
	}
	if o.layers > 0 {
		return layersMain(ctx, log, o)
	}
	return runAB(ctx, log, o, os.Stdout)
}

// runAB starts the servers, runs the rounds and prints the medians and
// each variant against nbdkit to out.
func runAB(ctx context.Context, log *slog.Logger, o abOptions, out io.Writer) error {
	w, err := os.MkdirTemp(o.dir, "bf-ab.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(w)
	img, kitImg := filepath.Join(w, "disk.img"), filepath.Join(w, "kit.img")
	if err := randomFile(img, imgBytes); err != nil {
		return err
	}
	if _, err := harness.CopyFile(kitImg, img); err != nil {
		return err
	}
	kernel, ipxe, err := standIns(w)
	if err != nil {
		return err
	}
	uris := map[string]string{}
	var keys []string
	port := 11000
	for _, v := range o.variants {
		d := filepath.Join(w, v.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		cfg := bfConfig{data: filepath.Join(d, "data"), ipxe: ipxe, httpPort: port + 1, nbdPort: port,
			profiles: []profile{{"rw", kernel, "ab", "persistent"}}, machines: []machine{{"52:54:00:ab:00:01", "ab", "rw"}}}
		bf, err := startBootfleet("nbd-ab-"+v.name, absBinary(v.bin), filepath.Join(d, "bf.yaml"), filepath.Join(d, "bf.log"), v.env, cfg)
		if err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		defer bf.proc.Stop()
		if err := bf.importImage(ctx, "ab", img, filepath.Join(d, "import.log")); err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		if uris[v.name], err = bf.export("52:54:00:ab:00:01"); err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		if _, err := harness.Output(ctx, "nbdcopy", img, uris[v.name]); err != nil {
			return fmt.Errorf("variant %s: fill the overlay: %w", v.name, err)
		}
		keys = append(keys, v.name)
		port += 10
	}
	kit, err := harness.Start("nbd-ab-nbdkit", "", filepath.Join(w, "kit.log"), nil, nbdkitArgs(fmt.Sprint(port), kitImg, false)...)
	if err != nil {
		return err
	}
	defer kit.Stop()
	uris["nbdkit"] = fmt.Sprintf("nbd://127.0.0.1:%d", port)
	if err := kit.WaitReady(10*time.Second, func() error { _, err := exportSize(ctx, uris["nbdkit"]); return err }); err != nil {
		return err
	}
	keys = append(keys, "nbdkit")

	got := map[string][]float64{}
	for r := 1; r <= o.rounds; r++ {
		var line []string
		for _, k := range harness.Rotate(keys, r) {
			unix.Sync()
			v := abRun(ctx, o, uris[k])
			if math.IsNaN(v) {
				log.Warn("fio failed", "server", k, "round", r)
			}
			got[k] = append(got[k], v)
			line = append(line, fmt.Sprintf("%s %.0f", k, v))
		}
		fmt.Fprintf(out, "== round %d/%d: %s\n", r, o.rounds, strings.Join(line, "  "))
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	fmt.Fprint(out, abSummary(keys, got))
	return nil
}

// abRun is one fio run: write IOPS when it wrote, else read IOPS; NaN when
// it failed.
func abRun(ctx context.Context, o abOptions, uri string) float64 {
	var stdout bytes.Buffer
	_, err := client(ctx, []string{"fio", "--ioengine=nbd", "--bs=4k", "--iodepth=32", "--numjobs=1", "--ramp_time=1",
		fmt.Sprintf("--runtime=%d", o.runtime), "--time_based", "--output-format=terse", "--name=ab", "--uri=" + uri, "--rw=" + o.rw}, &stdout)
	if err != nil {
		return math.NaN()
	}
	r, err := parseTerse(stdout.String())
	if err != nil {
		return math.NaN()
	}
	v, err := r.iops(r.WriteIOPS > 0)
	if err != nil {
		return math.NaN()
	}
	return v
}

// abSummary is each server's median and runs, then each variant against
// nbdkit round by round. got holds the servers' figures in round order.
func abSummary(keys []string, got map[string][]float64) string {
	var w strings.Builder
	for _, k := range keys {
		var runs []string
		var xs []float64
		for _, v := range got[k] {
			if math.IsNaN(v) {
				runs = append(runs, "failed")
				continue
			}
			xs = append(xs, v)
			runs = append(runs, fmt.Sprintf("%.0f", v))
		}
		fmt.Fprintf(&w, "%-10s median %7.0f IOPS  runs: %s\n", k, harness.Median(xs), strings.Join(runs, " "))
	}
	for _, k := range keys {
		if k == "nbdkit" {
			continue
		}
		var pairs [][2]float64
		for i, v := range got[k] {
			if i < len(got["nbdkit"]) {
				pairs = append(pairs, [2]float64{v, got["nbdkit"][i]})
			}
		}
		v := harness.Compare(pairs)
		fmt.Fprintf(&w, "%-10s over nbdkit, round by round: median %.3f, ahead in %d of %d (sign test p = %.2f)\n", k, v.Ratio, v.Wins, v.N, v.P)
	}
	return w.String()
}
