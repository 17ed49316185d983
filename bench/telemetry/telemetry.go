package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

const (
	namespace = "bf-telemetry"
	httpPort  = 8097
	tftpPort  = 6997
	httpSize  = 200 << 20
	tftpSize  = 50 << 20
)

type options struct {
	rounds    int
	bootfleet string
	out       string
}

// sample is one round of one mode.
type sample struct {
	http, tftp time.Duration
	cpu        time.Duration
}

// Main measures ROUNDS rounds (see -h) and writes the report.
func Main(ctx context.Context, log *slog.Logger, args []string) error {
	var o options
	fs := flag.NewFlagSet("telemetry", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 7, "rounds; each runs both modes, which goes first alternating")
	fs.StringVar(&o.bootfleet, "bootfleet", "bin/bootfleet", "bootfleet binary")
	fs.StringVar(&o.out, "out", "BENCHMARKS-telemetry.md", "report to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	for _, t := range []string{"ip", "atftp", "curl", o.bootfleet} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found (make build; scripts/bench-deps.sh installs the clients): %w", t, err)
		}
	}
	host := harness.DescribeHost(ctx)
	work, err := os.MkdirTemp("/dev/shm", "bf-telemetry.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	if err := os.MkdirAll(filepath.Join(work, "dl"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for name, size := range map[string]int{"http.bin": httpSize, "tftp.bin": tftpSize} {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			return err
		}
	}
	net, err := harness.NewLoopback(ctx, namespace)
	if err != nil {
		return err
	}
	defer net.Close()

	httpCmd, tftpCmd := clientCommands(work)
	res := map[string][]sample{}
	for r := range o.rounds {
		for _, mode := range harness.Rotate([]string{"on", "off"}, r) {
			s, err := round(ctx, o, work, mode, httpCmd, tftpCmd)
			if err != nil {
				return fmt.Errorf("round %d, telemetry %s: %w", r+1, mode, err)
			}
			res[mode] = append(res[mode], s)
		}
		log.Info("telemetry bench", "round", r+1, "of", o.rounds)
	}
	report := render(o, host, res, httpCmd, tftpCmd, work)
	return os.WriteFile(o.out, []byte(report), 0o644)
}

// clientCommands are the two downloads, as argv in the namespace.
func clientCommands(work string) (httpCmd, tftpCmd []string) {
	httpCmd = []string{"curl", "-sf", "-o", filepath.Join(work, "dl", "http.bin"),
		fmt.Sprintf("http://127.0.0.1:%d/files/http.bin", httpPort)}
	tftpCmd = []string{"atftp", "--get", "-r", "tftp.bin", "-l", filepath.Join(work, "dl", "tftp.bin"),
		"--option", "blksize 1456", "--option", "windowsize 64", "127.0.0.1", fmt.Sprint(tftpPort)}
	return httpCmd, tftpCmd
}

// round starts bootfleet in mode, times both downloads, checks them against
// the served files and reads the server's CPU time.
func round(ctx context.Context, o options, work, mode string, httpCmd, tftpCmd []string) (sample, error) {
	cfg := filepath.Join(work, "c-"+mode+".yaml")
	yaml := fmt.Sprintf(`server_ip: 127.0.0.1
data: %s
dhcp: {mode: off}
telemetry: %s
tftp: {listen: "127.0.0.1:%d", root: %s}
http: {listen: "127.0.0.1:%d"}
log: {level: warn}
`, filepath.Join(work, "data-"+mode), mode, tftpPort, filepath.Join(work, "root"), httpPort)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return sample{}, err
	}
	p, err := harness.Start("telemetry-"+mode, namespace, filepath.Join(work, "log-"+mode), nil,
		o.bootfleet, "serve", "--config", cfg)
	if err != nil {
		return sample{}, err
	}
	defer p.Stop()
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)
	if err := p.WaitReady(10*time.Second, func() error { return inNamespace(ctx, "curl", "-sf", "-o", "/dev/null", metrics) }); err != nil {
		return sample{}, err
	}
	var s sample
	cpu0 := harness.SchedCPU(p.Pid())
	for _, d := range []struct {
		argv []string
		name string
		took *time.Duration
	}{{httpCmd, "http.bin", &s.http}, {tftpCmd, "tftp.bin", &s.tftp}} {
		t0 := time.Now()
		if err := inNamespace(ctx, d.argv...); err != nil {
			return s, err
		}
		*d.took = time.Since(t0)
		if err := sameFile(filepath.Join(work, "dl", d.name), filepath.Join(work, "root", d.name)); err != nil {
			return s, err
		}
	}
	s.cpu = harness.SchedCPU(p.Pid()) - cpu0
	return s, nil
}

func inNamespace(ctx context.Context, argv ...string) error {
	return harness.Sh(ctx, "ip", append([]string{"netns", "exec", namespace}, argv...)...)
}

// sameFile fails when a download differs from what was served: a wrong
// file must never become a number.
func sameFile(got, want string) error {
	a, err := os.ReadFile(got)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(want)
	if err != nil {
		return err
	}
	if string(a) != string(b) {
		return fmt.Errorf("%s differs from the served %s (%d bytes, want %d)", got, want, len(a), len(b))
	}
	return nil
}

func render(o options, h harness.Host, res map[string][]sample, httpCmd, tftpCmd []string, work string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	secs := func(mode string, f func(sample) time.Duration) []float64 {
		var xs []float64
		for _, s := range res[mode] {
			xs = append(xs, f(s).Seconds())
		}
		return xs
	}
	p("# Telemetry cost\n\n")
	p("Written by `make bench-telemetry` (bench/telemetry) on %s.\n", h)
	p("Loopback, no shaping, so CPU is the only limit; %d rounds, each running both modes, which goes first alternating; medians.\n", o.rounds)
	p("Target: the difference stays under 2%%. A positive difference means telemetry on was slower.\n\n")
	p("| download | telemetry off | telemetry on | on vs off | rounds on slower (sign test p) |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, size int, f func(sample) time.Duration) {
		on, off := harness.Median(secs("on", f)), harness.Median(secs("off", f))
		v := harness.Compare(pairs(secs("on", f), secs("off", f)))
		p("| %s | %.3f s (%.0f MB/s) | %.3f s (%.0f MB/s) | %+.1f%% | %d of %d (p = %.2f) |\n", name,
			off, float64(size)/off/1e6, on, float64(size)/on/1e6, (on-off)/off*100, v.Wins, v.N, v.P)
	}
	row("HTTP, "+harness.MiB(httpSize), httpSize, func(s sample) time.Duration { return s.http })
	row("TFTP, "+harness.MiB(tftpSize), tftpSize, func(s sample) time.Duration { return s.tftp })
	cpu := func(s sample) time.Duration { return s.cpu }
	gb := float64(httpSize+tftpSize) / 1e9
	on, off := harness.Median(secs("on", cpu)), harness.Median(secs("off", cpu))
	v := harness.Compare(pairs(secs("on", cpu), secs("off", cpu)))
	p("| server CPU per GB served (both downloads) | %.2f s | %.2f s | %+.1f%% | %d of %d (p = %.2f) |\n\n",
		off/gb, on/gb, (on-off)/off*100, v.Wins, v.N, v.P)
	p("Wall times on a shared 2-core machine move by ±10%% between rounds, more than any telemetry effect; server CPU\n")
	p("(the sum of /proc/PID/task/*/schedstat run time over bootfleet's threads) is the steadier figure.\n")
	p("Commands (server: `bin/bootfleet serve` with `telemetry: on|off`, dhcp off, tftp.root holding random files,\n")
	p("everything in `ip netns exec %s`):\n\n", namespace)
	sub := func(argv []string) string { return strings.ReplaceAll(harness.ShellJoin(argv), work, "$WORK") }
	p("- HTTP: `%s`\n- TFTP: `%s`\n\n", sub(httpCmd), sub(tftpCmd))
	for _, mode := range []string{"on", "off"} {
		p("Raw seconds (%s): http %s; tftp %s\n\n", mode,
			join(secs(mode, func(s sample) time.Duration { return s.http })), join(secs(mode, func(s sample) time.Duration { return s.tftp })))
	}
	return w.String()
}

// pairs zips the two modes' figures round by round.
func pairs(on, off []float64) [][2]float64 {
	var ps [][2]float64
	for i := range min(len(on), len(off)) {
		ps = append(ps, [2]float64{on[i], off[i]})
	}
	return ps
}

func join(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(s, " ")
}
