package transfer

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// options are the command-line flags.
type options struct {
	cases        map[int]bool
	runs         int
	stormRuns    int
	lossRuns     int
	quick        bool
	rate         string
	rateBps      float64
	clients      int
	out          string
	plots        string
	work         string
	bootfleet    string
	hpa          string
	servers      map[string]bool
	timeout      time.Duration
	stormTimeout time.Duration
	render       string

	bigSize, nbpSize, kernelSize, concSize, lossSize int64
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cases := fs.String("cases", "1,2,3,4,5", "comma-separated cases to run (see BENCHMARKS-transfer.md)")
	fs.IntVar(&o.runs, "runs", 3, "repetitions of each single-transfer figure and of cases 2 and 5; the median is reported")
	fs.IntVar(&o.stormRuns, "storm-runs", 1, "repetitions of each case 3 boot storm (each moves 8.6 GB)")
	fs.IntVar(&o.lossRuns, "loss-runs", 3, "repetitions of each case 4 lossy transfer (stopped once a figure has taken 60 s)")
	kernelMiB := fs.Int("kernel-mib", 40, "size of the case 3 kernel+initrd in MiB (the targets assume 40; 20 halves the storm's time)")
	fs.BoolVar(&o.quick, "quick", false, "smoke run: small files, 20 clients, 1 run")
	fs.StringVar(&o.rate, "rate", "1gbit", "tbf rate of the shaped link, in tc syntax (1gbit or 10gbit)")
	fs.IntVar(&o.clients, "clients", 200, "concurrent clients in cases 2, 3 and 5")
	fs.StringVar(&o.out, "out", "BENCHMARKS-transfer.md", "report to write")
	fs.StringVar(&o.plots, "plots", "bench/results", "directory for PNG plots and results.json")
	fs.StringVar(&o.work, "work", "/dev/shm/bf-bench", "tmpfs directory for served files, configs and logs (deleted at exit)")
	fs.StringVar(&o.bootfleet, "bootfleet", "bin/bootfleet", "bootfleet binary")
	fs.StringVar(&o.hpa, "tftpd-hpa", "/var/cache/bootfleet-bench/tftpd-hpa/usr/sbin/in.tftpd", "tftp-hpa's in.tftpd (scripts/bench-deps.sh extracts it from the .deb)")
	servers := fs.String("servers", "bootfleet,dnsmasq,tftp-hpa,atftpd,nginx", "servers to measure")
	fs.DurationVar(&o.timeout, "timeout", 45*time.Minute, "bound on the whole run; the report is written with what was measured")
	fs.DurationVar(&o.stormTimeout, "storm-timeout", 8*time.Minute, "deadline for one boot storm; clients still running are counted as timed out")
	fs.StringVar(&o.render, "render", "", "only re-render the report from this results.json")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.cases = map[int]bool{}
	for _, c := range strings.Split(*cases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 5 {
			return nil, fmt.Errorf("-cases: want numbers 1 to 5 separated by commas, got %q", *cases)
		}
		o.cases[n] = true
	}
	o.servers = map[string]bool{}
	for _, s := range strings.Split(*servers, ",") {
		o.servers[strings.TrimSpace(s)] = true
	}
	var err error
	if o.rateBps, err = harness.ParseRate(o.rate); err != nil {
		return nil, fmt.Errorf("-rate: %w", err)
	}
	const MiB = 1 << 20
	// The loss case moves an NBP-sized file: lockstep peers wait a full
	// retransmission timeout per lost packet, and a 201 MiB file would take hours.
	if *kernelMiB < 1 {
		return nil, fmt.Errorf("-kernel-mib: want at least 1, got %d", *kernelMiB)
	}
	o.bigSize, o.nbpSize, o.kernelSize, o.concSize, o.lossSize = 201*MiB, 1*MiB, int64(*kernelMiB)*MiB, 8*MiB, 1*MiB
	if o.quick {
		o.bigSize, o.kernelSize, o.concSize, o.lossSize = 16*MiB, 4*MiB, 2*MiB, 256<<10
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, p := range map[string]*int{"runs": &o.runs, "storm-runs": &o.stormRuns, "loss-runs": &o.lossRuns} {
			if !set[name] {
				*p = 1
			}
		}
		if !set["clients"] {
			o.clients = 20
		}
	}
	if o.runs < 1 || o.stormRuns < 1 || o.lossRuns < 1 || o.clients < 1 {
		return nil, errors.New("-runs, -storm-runs, -loss-runs and -clients must be at least 1")
	}
	return o, nil
}

// bench holds one run's state.
type bench struct {
	opt       *options
	log       *slog.Logger
	res       *Results
	work      string
	root      string // served files
	fifos     string
	files     map[string]file
	probeFile file
	shaped    *harness.Net
	loop      *harness.Net
	specs     []*serverSpec
}

// Main measures what args select (see -h) and writes the report; ctx
// bounds the run, and a cancel still writes what was measured.
func Main(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) > 0 && args[0] == "ab" {
		return abMain(ctx, log, args[1:])
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.render != "" {
		r, err := loadResults(o.render)
		if err != nil {
			return err
		}
		return writeReport(r, o, log)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root for network namespaces, tc and nft; run `sudo make bench`")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	lock, err := harness.Lock("/run/bf-bench.lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	harness.DeleteNamespaces(nsServer, nsClient, nsLoopback)

	b := &bench{opt: o, log: log, work: o.work, res: &Results{Started: time.Now().UTC().Format(time.RFC3339)}}
	started := time.Now()
	if err := b.setup(ctx); err != nil {
		b.teardown()
		return err
	}
	defer b.teardown()

	for c := 1; c <= 5; c++ {
		if !o.cases[c] || ctx.Err() != nil {
			continue
		}
		log.Info("case start", "case", c)
		b.runCase(ctx, c)
	}
	b.res.Complete = ctx.Err() == nil
	if !b.res.Complete {
		b.note("run interrupted (%v): the report holds what was measured until then", context.Cause(ctx))
	}
	b.res.Seconds = time.Since(started).Seconds()
	b.res.Host = append(b.res.Host, "load average at the end: "+harness.LoadAvg())
	return writeReport(b.res, o, log)
}

func (b *bench) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.log.Warn(msg)
	b.res.Notes = append(b.res.Notes, msg)
}

// setup checks the tools, writes the served files and builds the topologies.
func (b *bench) setup(ctx context.Context) error {
	o := b.opt
	for _, t := range []string{"ip", "tc", "nft", "atftp", "curl"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found: run scripts/bench-deps.sh, which installs the bench's tools", t)
		}
	}
	if err := os.RemoveAll(b.work); err != nil {
		return err
	}
	b.root = filepath.Join(b.work, "root")
	b.fifos = filepath.Join(b.work, "fifo")
	for _, d := range []string{b.root, b.fifos} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Random content: compressible or repeating data could flatter a server
	// that compresses or dedups. ChaCha8 is fast enough to make 250 MB in a second.
	rng := rand.NewChaCha8([32]byte{'b', 'o', 'o', 't', 'f', 'l', 'e', 'e', 't'})
	b.files = map[string]file{}
	for _, f := range []struct {
		name string
		size int64
	}{{"big.img", o.bigSize}, {"nbp.efi", o.nbpSize}, {"kernel-initrd.img", o.kernelSize},
		{"conc.img", o.concSize}, {"loss.img", o.lossSize}, {"probe.bin", 64 << 10}} {
		buf := make([]byte, f.size)
		_, _ = rng.Read(buf)
		if err := os.WriteFile(filepath.Join(b.root, f.name), buf, 0o644); err != nil {
			return fmt.Errorf("write %s (is %s a tmpfs with room for it?): %w", f.name, b.work, err)
		}
		b.files[f.name] = file{Name: f.name, Size: f.size, Sum: sha256.Sum256(buf)}
	}
	b.probeFile = b.files["probe.bin"]

	for _, s := range specs(o) {
		if !o.servers[s.name] {
			continue
		}
		info := ServerInfo{Name: s.name}
		if _, err := exec.LookPath(s.bin); err != nil {
			info.Skipped = fmt.Sprintf("%s not found (%v); scripts/bench-deps.sh installs the peers", s.bin, err)
			b.note("%s: not measured: %s", s.name, info.Skipped)
		} else {
			info.Version = s.version(s.bin)
			b.specs = append(b.specs, s)
		}
		b.res.Servers = append(b.res.Servers, info)
	}

	var err error
	if b.shaped, err = newShaped(ctx, o.rate); err != nil {
		return err
	}
	if b.loop, err = newLoopback(ctx); err != nil {
		return err
	}
	cpuModel := harness.CPUModel()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	// Other work on the machine (other VMs, builds) takes CPU from every
	// figure; say how much there was before bench started.
	b.res.OtherBefore = harness.OtherLoad(2 * time.Second)
	b.res.Host = []string{
		fmt.Sprintf("%d CPUs (%s), Linux %s", runtime.NumCPU(), cpuModel, strings.TrimSpace(string(kernel))),
		fmt.Sprintf("before bench started, other work kept %.0f%% of the machine's CPU busy (2 s sample); load average %s", 100*b.res.OtherBefore, harness.LoadAvg()),
		"client tools: " + firstLine("-V")("atftp") + "; " + firstLine("-V")("curl"),
	}
	b.res.Rate, b.res.RateBps, b.res.Shaping, b.res.Clients, b.res.NumCPU = o.rate, o.rateBps, b.shaped.Shaping, o.clients, runtime.NumCPU()
	b.res.LossRule = strings.Replace(harness.LossRule(serverAddr, 0), "< 0", "< N", 1)
	b.res.Settings = []string{
		fmt.Sprintf("runs: %d per figure (median reported); case 3: %d; case 4: %d", o.runs, o.stormRuns, o.lossRuns),
		fmt.Sprintf("clients in cases 2, 3 and 5: %d", o.clients),
		fmt.Sprintf("files: %s (case 1, 2, 5 single), %s + %s (case 3 per client), %s (case 2 and 5 per client), %s (case 4)",
			harness.MiB(o.bigSize), harness.MiB(o.nbpSize), harness.MiB(o.kernelSize), harness.MiB(o.concSize), harness.MiB(o.lossSize)),
	}
	if o.quick {
		b.res.Settings = append(b.res.Settings, "QUICK smoke run: small files and few clients; these numbers are not the benchmark")
	}
	return nil
}

func (b *bench) teardown() {
	if b.shaped != nil {
		b.shaped.Close()
	}
	if b.loop != nil {
		b.loop.Close()
	}
	_ = os.RemoveAll(b.work)
}
