package storm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/internal/storm"
)

const (
	nsServer   = "bf-storm-srv"
	nsClient   = "bf-storm-cli"
	devServer  = "bfst-srv"
	devClient  = "bfst-cli"
	serverIP   = "10.78.0.1"
	clientIP   = "10.78.0.2"
	rangeFirst = "10.78.1.1"
	rangeLast  = "10.78.3.254"
	imageName  = "stormroot"
	maxImage   = 256 << 20
)

type options struct {
	clients   []int
	firmwares []string
	stacks    []string
	runs      int
	rate      string
	mcastRate string
	initrd    int64
	kernel    int64
	// kernelFile is a real kernel to serve instead of kernel random
	// bytes; ukiStub the systemd-stub the server builds UKIs from.
	kernelFile, ukiStub string
	trace               string
	timeout             time.Duration
	bootfleet           string
	ipxeDir             string
	out                 string
	plots               string
	work                string
	warmUp              bool
}

// run is one storm: a stack, a firmware, N machines.
type run struct {
	Stack     string
	Firmware  string
	N         int
	Run       int
	Report    *storm.Report `json:",omitempty"`
	Err       string        `json:",omitempty"`
	ServerCPU float64       // seconds
	ClientCPU float64       // seconds
	PeakRSS   int64         // server, bytes
	WarmUp    float64       `json:",omitempty"` // seconds of the uncounted boot before a multicast storm
	// GroupBytes is what the server multicast during the storm (UDP
	// payload), GroupAgain of it chunks it had multicast before.
	GroupBytes, GroupAgain float64 `json:",omitempty"`
	// GroupRefused is the datagrams the server's socket refused (the
	// dropped stack's nft), GroupRequests the agents' requests.
	GroupRefused, GroupRequests float64 `json:",omitempty"`
	// MTFTPBytes is what the PXE MTFTP carousel sent during the storm
	// (file bytes), MTFTPCycles its full cycles of a file.
	MTFTPBytes, MTFTPCycles float64 `json:",omitempty"`
	// CPUProfile is the simulator's CPU profile of this storm (the
	// multicast stack at the largest N only), CPU its seconds by
	// component, CPUErr why it could not be read.
	CPUProfile string     `json:",omitempty"`
	CPU        []cpuShare `json:",omitempty"`
	CPUErr     string     `json:",omitempty"`
	// MachineBusy is the share of all CPUs' time the machine was busy
	// during the storm: the processes' CPU above, the kernel's packet work
	// in softirq (charged to no process) and anything else running.
	MachineBusy float64 `json:",omitempty"`
}

// Main runs the storms args select (see -h) and writes the report.
func Main(ctx context.Context, log *slog.Logger, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root for network namespaces and tc")
	}
	lock, err := harness.Lock("/run/bf-bench-storm.lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	host := harness.DescribeHost(ctx)
	b, err := setup(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()

	var runs []run
	started := time.Now()
	for r := 1; r <= o.runs; r++ {
		for _, fw := range o.firmwares {
			for _, n := range o.clients {
				// Alternate which stack goes first, so drift in the
				// machine's load hits both alike.
				for _, st := range harness.Rotate(o.stacks, r+n) {
					if ctx.Err() != nil {
						break
					}
					res := b.storm(ctx, st, fw, n, r)
					log.Info("storm", "stack", st, "firmware", fw, "clients", n, "run", r, "err", res.Err,
						"wall", wallOf(res), "booted", bootedOf(res), "server_cpu", res.ServerCPU, "client_cpu", res.ClientCPU)
					runs = append(runs, res)
				}
			}
		}
	}
	rep := &report{Host: host, Opts: o, Runs: runs, Elapsed: time.Since(started), Files: b.files,
		Shaping: b.net.Shaping, Versions: b.versions(ctx)}
	if rep.Plots, err = rep.writePlots(o.plots); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(rep.render()), 0o644); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(runs, "", " ")
	return os.WriteFile(strings.TrimSuffix(o.out, ".md")+".json", raw, 0o644)
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	clients := fs.String("clients", "1,2,5,10,20,40,100,200", "machines per storm, comma separated")
	firmwares := fs.String("firmware", "uefi,ipxe", "firmware the machines play: uefi, bios, ipxe")
	stacks := fs.String("stacks", strings.Join(stackNames, ","), "bootfleet (unicast root), bootfleet-multicast, bootfleet-multicast-dropped (the groups dropped on the server), and peer: dnsmasq + nginx + nbdkit")
	fs.IntVar(&o.runs, "runs", 1, "storms per stack, firmware and N")
	fs.StringVar(&o.rate, "rate", "1gbit", "tbf rate of the server's link")
	fs.StringVar(&o.mcastRate, "mcast-rate", "500M", "multicast.rate of the multicast stacks: what the default, 50% of the link, gives on the 1 Gbit/s NIC the shaped link stands for (the veth reports 10 Gbit/s)")
	initrdMiB := fs.Int("initrd-mib", 5, "initrd size in MiB (5: what `bootfleet initramfs build` makes for the Debian 12 image, see the README)")
	kernelMiB := fs.Int("kernel-mib", 8, "kernel size in MiB, of random bytes when -kernel-file is not there")
	fs.StringVar(&o.kernelFile, "kernel-file", "/var/cache/bootfleet-e2e/image/vmlinuz", "a real kernel (EFI stub) to serve, so the multicast stacks' server can build UEFI machines a UKI (scripts/mkimage.sh makes this one); missing: -kernel-mib of random bytes, kernel alone by MTFTP")
	fs.StringVar(&o.ukiStub, "uki-stub", "/usr/lib/systemd/boot/efi/linuxx64.efi.stub", "systemd-stub the server builds UKIs from (multicast.uki_stub)")
	fs.StringVar(&o.trace, "trace", "internal/storm/testdata/debian12.trace", "NBD read trace every machine replays")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "per machine, power-on to DoneURL")
	fs.StringVar(&o.bootfleet, "bootfleet", "bin/bootfleet", "bootfleet binary (server and simulator)")
	fs.StringVar(&o.ipxeDir, "ipxe", "/usr/lib/ipxe", "directory holding ipxe.efi (Debian's ipxe)")
	fs.StringVar(&o.out, "out", "BENCHMARKS-storm.md", "report to write (and its .json beside it)")
	fs.StringVar(&o.plots, "plots", "bench/results", "directory for the PNG plots the report shows")
	fs.StringVar(&o.work, "work", "/dev/shm/bf-storm", "tmpfs directory for served files and server state (deleted at exit)")
	fs.BoolVar(&o.warmUp, "warm-up", true, "boot one machine, not counted, before each storm of the multicast stacks, so the server knows the content's read order")
	quick := fs.Bool("quick", false, "smoke run: 1, 2 and 5 machines, 4 MiB initrd")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *quick {
		*clients, *initrdMiB, *kernelMiB = "1,2,5", 4, 1
	}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 700 {
			return nil, fmt.Errorf("-clients: want numbers 1 to 700 (the DHCP range holds 765), got %q", c)
		}
		o.clients = append(o.clients, n)
	}
	for _, f := range strings.Split(*firmwares, ",") {
		if _, err := storm.ParseFirmware(strings.TrimSpace(f)); err != nil {
			return nil, fmt.Errorf("-firmware: %w", err)
		}
		o.firmwares = append(o.firmwares, strings.TrimSpace(f))
	}
	for _, s := range strings.Split(*stacks, ",") {
		if s = strings.TrimSpace(s); !slices.Contains(stackNames, s) {
			return nil, fmt.Errorf("-stacks: want some of %s, got %q", strings.Join(stackNames, ", "), s)
		}
		o.stacks = append(o.stacks, s)
	}
	if o.runs < 1 || *initrdMiB < 1 || *kernelMiB < 1 {
		return nil, errors.New("-runs, -initrd-mib and -kernel-mib must be at least 1")
	}
	o.initrd, o.kernel = int64(*initrdMiB)<<20, int64(*kernelMiB)<<20
	return o, nil
}

// bench is one run's shared state: the link and the served files.
type bench struct {
	o     *options
	net   *harness.Net
	files map[string]int64 // name -> size, for the report
	image string
	trace string // absolute path
}

func setup(ctx context.Context, o *options) (*bench, error) {
	for _, t := range []string{"ip", "tc", "curl", "dnsmasq", "nginx", "nbdkit", o.bootfleet} {
		if _, err := exec.LookPath(t); err != nil {
			return nil, fmt.Errorf("%s not found: run scripts/bench-deps.sh and make build", t)
		}
	}
	trace, err := filepath.Abs(o.trace)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(trace)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	tr, err := storm.ParseTrace(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("-trace %s: %w", trace, err)
	}
	b := &bench{o: o, files: map[string]int64{}, trace: trace}
	if err := os.RemoveAll(o.work); err != nil {
		return nil, err
	}
	www := filepath.Join(o.work, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		return nil, err
	}
	// The image covers the trace's reads up to maxImage; the simulator
	// moves reads past a smaller export's end inside it, so every machine
	// still moves the trace's bytes, and each storm imports the image anew.
	var end uint64
	for _, r := range tr.Reads {
		end = max(end, r.Offset+uint64(r.Length))
	}
	imgSize := min(max(int64(end+(1<<20)-1)&^((1<<20)-1), 16<<20), maxImage)
	b.image = filepath.Join(o.work, "root.img")
	random := map[string]int64{"www/vmlinuz": o.kernel, "www/initrd.img": o.initrd, "root.img": imgSize}
	if n, err := harness.CopyFile(filepath.Join(o.work, "www", "vmlinuz"), o.kernelFile); err == nil {
		delete(random, "www/vmlinuz")
		b.files["vmlinuz"] = n
	}
	for name, size := range random {
		if err := randomFile(filepath.Join(o.work, name), size); err != nil {
			return nil, fmt.Errorf("write %s (is %s a tmpfs with room?): %w", name, o.work, err)
		}
		b.files[filepath.Base(name)] = size
	}
	if n, err := ukiSize(o.ukiStub, filepath.Join(o.work, "www", "vmlinuz"), filepath.Join(o.work, "www", "initrd.img")); err == nil {
		b.files[ukiFile] = n
	}
	b.files["trace reads"] = tr.Bytes()
	if st, err := os.Stat(filepath.Join(o.ipxeDir, "ipxe.efi")); err == nil {
		b.files["ipxe.efi"] = st.Size()
	}
	if err := os.WriteFile(filepath.Join(www, "done"), []byte("ok\n"), 0o644); err != nil {
		return nil, err
	}
	b.net, err = harness.NewPair(ctx, harness.Pair{ServerNS: nsServer, ClientNS: nsClient, ServerDev: devServer,
		ClientDev: devClient, ServerAddr: serverIP, ClientAddr: clientIP, PrefixLen: 16, Rate: o.rate, ServerOnly: true, Classes: true})
	if err != nil {
		return nil, err
	}
	for _, a := range markArgs() {
		if err := harness.Sh(ctx, a[0], a[1:]...); err != nil {
			b.close()
			return nil, fmt.Errorf("mark the groups for the paced class: %w", err)
		}
		b.net.Shaping = append(b.net.Shaping, harness.ShellJoin(a))
	}
	return b, nil
}

func (b *bench) close() {
	if b.net != nil {
		b.net.Close()
	}
	_ = os.RemoveAll(b.o.work)
}

// randomFile writes size random bytes: compressible data could flatter a
// server or a link.
func randomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// storm starts a fresh stack, runs the simulator against it and stops it.
func (b *bench) storm(ctx context.Context, stack, fw string, n, r int) run {
	res := run{Stack: stack, Firmware: fw, N: n, Run: r}
	dir := filepath.Join(b.o.work, fmt.Sprintf("%s-%s-%d", stack, fw, n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Err = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	procs, err := b.start(ctx, stack, dir)
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
		if stack == stackDropped {
			dropGroups(context.Background(), false)
		}
	}()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if multicastStack(stack) && b.o.warmUp {
		// A lab's server has seen its image boot before: it learned the
		// content's read order (internal/readorder) from those boots, which
		// the machines of a storm then read ahead by. A server started
		// fresh has seen none, so one machine boots first, not counted.
		w, _, stderr, err := b.simulate(ctx, fw, 1, "")
		var rep storm.Report
		if err == nil {
			if err = json.Unmarshal(w.Bytes(), &rep); err == nil && rep.Summary.Booted != 1 {
				err = fmt.Errorf("%d of 1 machine booted", rep.Summary.Booted)
			}
		}
		if err != nil {
			res.Err = fmt.Sprintf("warm-up boot: %v: %s", err, harness.Tail(stderr.String(), 400))
			return res
		}
		res.WarmUp = rep.Summary.WallSeconds
	}
	cpu0 := cpuOf(procs)
	var g0 groupSent
	if multicastStack(stack) {
		g0 = b.scrapeGroup(ctx)
	}
	if stack == stackMulticast && fw == b.o.firmwares[0] && n == b.o.clients[len(b.o.clients)-1] {
		// The storm the report's CPU section explains; the others would
		// only cost the profiler's share of a CPU.
		res.CPUProfile = filepath.Join(strings.TrimSuffix(b.o.out, ".md")+"-cpu", fmt.Sprintf("%s-%s-%d-run%d.pprof", stack, fw, n, r))
	}
	var prof string // absolute: the simulator runs in its namespace
	if res.CPUProfile != "" {
		var err error
		if prof, err = filepath.Abs(res.CPUProfile); err == nil {
			err = os.MkdirAll(filepath.Dir(prof), 0o755)
		}
		if err != nil {
			res.Err = fmt.Sprintf("directory for the CPU profile: %v", err)
			return res
		}
	}
	busy0, total0, _ := harness.MachineCPU()
	stdout, cmd, stderr, runErr := b.simulate(ctx, fw, n, prof) // runErr: non-zero when a machine failed; the JSON says which
	if busy1, total1, _ := harness.MachineCPU(); total1 > total0 {
		res.MachineBusy = (busy1 - busy0) / (total1 - total0)
	}
	res.ServerCPU = cpuOf(procs) - cpu0
	if multicastStack(stack) {
		g := b.scrapeGroup(ctx)
		res.GroupBytes, res.GroupAgain = g.Bytes-g0.Bytes, g.Again-g0.Again
		res.GroupRefused, res.GroupRequests = g.Refused-g0.Refused, g.Requests-g0.Requests
		res.MTFTPBytes, res.MTFTPCycles = g.MTFTPBytes-g0.MTFTPBytes, g.MTFTPCycles-g0.MTFTPCycles
	}
	for _, p := range procs {
		res.PeakRSS += p.PeakRSS()
	}
	if cmd.ProcessState != nil {
		res.ClientCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if res.CPUProfile != "" {
		var err error
		if res.CPU, err = readCPUProfile(prof); err != nil {
			res.CPUErr = err.Error()
		}
	}
	var rep storm.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		res.Err = fmt.Sprintf("simulator: %v; no JSON report (%v): %s", runErr, err, harness.Tail(stderr.String(), 400))
		return res
	}
	res.Report = &rep
	return res
}

// simulate runs the simulator's storm of n machines with fw to its end,
// with a CPU profile into cpuProfile unless it is "", and returns its
// output and its process.
func (b *bench) simulate(ctx context.Context, fw string, n int, cpuProfile string) (*bytes.Buffer, *exec.Cmd, *bytes.Buffer, error) {
	argv := append([]string{"ip", "netns", "exec", nsClient}, b.stormArgv(fw, n)...)
	if cpuProfile != "" {
		argv = append(argv, "--cpu-profile", cpuProfile)
	}
	cctx, cancel := context.WithTimeout(ctx, b.o.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return &stdout, cmd, &stderr, err
}

// stormArgv is the simulator's command line for fw and n machines.
func (b *bench) stormArgv(fw string, n int) []string {
	return []string{b.o.bootfleet, "storm", "-i", devClient, "-n", strconv.Itoa(n), "--firmware", fw,
		"--trace", b.trace, "--timeout", b.o.timeout.String(), "-o", "json"}
}

func cpuOf(ps []*harness.Proc) float64 {
	var s float64
	for _, p := range ps {
		s += p.CPU()
	}
	return s
}

func (b *bench) versions(ctx context.Context) []string {
	return []string{
		"bootfleet " + harness.FirstLine(ctx, b.o.bootfleet, "version"),
		harness.FirstLine(ctx, "dnsmasq", "--version"),
		harness.FirstLine(ctx, "nginx", "-v"),
		harness.FirstLine(ctx, "nbdkit", "--version"),
	}
}
