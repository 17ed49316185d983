package dhcp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

type options struct {
	bootfleet, kea, dnsmasq, perfdhcp, pgtest string
	out, work                                 string
	rates                                     []int
	duration                                  time.Duration
	runs, clients                             int
	only                                      string
	keep                                      bool
}

// Measurement is one perfdhcp run against one server.
type Measurement struct {
	Server string
	Rate   int // offered DISCOVERs per second
	Run    int
	Result Result
	Err    error
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("dhcp", flag.ContinueOnError)
	rates := o.runFlags(fs, "BENCHMARKS-dhcp.md", "500,4000", "one below every server's capacity, one above", "server")
	fs.StringVar(&o.kea, "kea", "/usr/sbin/kea-dhcp4", "kea-dhcp4 binary (Debian kea-dhcp4-server)")
	fs.StringVar(&o.dnsmasq, "dnsmasq", "/usr/sbin/dnsmasq", "dnsmasq binary")
	fs.StringVar(&o.only, "servers", "bootfleet-sqlite,bootfleet-postgres,kea,dnsmasq", "servers to measure")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.check(*rates)
}

// runFlags defines the flags both DHCP benches take on fs and returns
// where -rates lands, for check: what the runs offer and where they write.
func (o *options) runFlags(fs *flag.FlagSet, out, rates, ratesWhy, per string) *string {
	fs.StringVar(&o.bootfleet, "bootfleet", "bin/bootfleet", "bootfleet binary")
	fs.StringVar(&o.perfdhcp, "perfdhcp", "/usr/sbin/perfdhcp", "perfdhcp binary (Debian kea-admin)")
	fs.StringVar(&o.pgtest, "pgtest", "scripts/pg-test.sh", "script that starts a throwaway PostgreSQL")
	fs.StringVar(&o.out, "out", out, "report to write")
	fs.StringVar(&o.work, "work", "/var/tmp", "parent of the run directory (lease stores live here; put it on the disk you deploy on)")
	r := fs.String("rates", rates, "offered DORA rates (perfdhcp -r), comma separated: "+ratesWhy)
	fs.DurationVar(&o.duration, "duration", 6*time.Second, "perfdhcp test period per run (-p)")
	fs.IntVar(&o.runs, "runs", 3, "runs per "+per+" and rate; the report gives the median")
	fs.IntVar(&o.clients, "clients", 60000, "distinct client MACs (perfdhcp -R)")
	fs.BoolVar(&o.keep, "keep", false, "keep the run directory (logs, lease stores, perfdhcp output)")
	return r
}

// check parses rates into o.rates and checks the run flags.
func (o *options) check(rates string) error {
	for _, r := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			return fmt.Errorf("-rates %q: want positive integers like 500,4000", rates)
		}
		o.rates = append(o.rates, n)
	}
	if o.runs < 1 || o.duration < time.Second || o.clients < 1 {
		return fmt.Errorf("want -runs >= 1, -duration >= 1s, -clients >= 1")
	}
	return nil
}

// Main measures the servers args select (see -h) and writes the report.
func Main(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces, port 67)")
	}
	for _, b := range []string{o.perfdhcp, "ip", "ss", "runuser"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found: %w (scripts/bench-deps.sh installs it)", b, err)
		}
	}
	lk, err := harness.Lock(lockFile)
	if err != nil {
		return err
	}
	defer lk.Close()

	work, err := os.MkdirTemp(o.work, "bf-dhcpbench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(work)
	}
	topo, err := buildTopology(ctx)
	if err != nil {
		return err
	}
	defer topo.Close()

	env := describeHost(ctx, o, work)
	env.Topology = topo.Commands
	targets, cleanup, err := selectTargets(ctx, o, env)
	defer cleanup()
	if err != nil {
		return err
	}

	start := time.Now()
	env.LoadBefore = harness.LoadAvg()
	var ms []Measurement
	for _, rate := range o.rates {
		for r := 1; r <= o.runs; r++ {
			for i, t := range targets {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				dir := filepath.Join(work, fmt.Sprintf("rate%d-run%d-%d", rate, r, i))
				res, err := measure(ctx, o, t, dir, rate, r)
				m := Measurement{Server: t.Name, Rate: rate, Run: r, Result: res, Err: err}
				ms = append(ms, m)
				logMeasurement(m)
			}
		}
	}
	env.LoadAfter = harness.LoadAvg()
	env.Elapsed = time.Since(start).Round(time.Second)
	if err := writeReport(o, env, targets, ms); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dhcpbench: wrote %s (%v)\n", o.out, env.Elapsed)
	if o.keep {
		fmt.Fprintf(os.Stderr, "dhcpbench: run directory kept: %s\n", work)
	}
	return nil
}

func selectTargets(ctx context.Context, o options, env *hostInfo) ([]*target, func(), error) {
	var ts []*target
	var db *pg
	cleanup := func() {
		if db != nil {
			db.stop()
		}
	}
	for _, name := range strings.Split(o.only, ",") {
		switch strings.TrimSpace(name) {
		case "bootfleet-sqlite":
			ts = append(ts, bootfleetSQLite(o.bootfleet))
		case "bootfleet-postgres":
			var err error
			if db, err = startPG(ctx, o.pgtest, nsServer, nil, ""); err != nil {
				return nil, cleanup, err
			}
			env.Postgres = db.settings(ctx)
			ts = append(ts, bootfleetPostgres(o.bootfleet, db))
		case "kea":
			ts = append(ts, kea(o.kea))
		case "dnsmasq":
			ts = append(ts, dnsmasq(o.dnsmasq))
		default:
			return nil, cleanup, fmt.Errorf("-servers: unknown %q; want bootfleet-sqlite, bootfleet-postgres, kea, dnsmasq", name)
		}
	}
	return ts, cleanup, nil
}

// perfdhcpArgs is the client command: relay-style DORA (perfdhcp sets giaddr
// to its own address and listens on port 67) unicast to the server, at a
// fixed offered rate, from random MACs among clients, with a fixed seed so
// every server sees the same MAC sequence; -x t prints per-packet timestamps.
func perfdhcpArgs(o options, rate, run int) []string {
	return []string{o.perfdhcp, "-4", "-l", vethClient, "-r", strconv.Itoa(rate), "-R", strconv.Itoa(o.clients),
		"-p", strconv.Itoa(int(o.duration.Seconds())), "-s", strconv.Itoa(run), "-x", "t", serverAddr}
}

func measure(ctx context.Context, o options, t *target, dir string, rate, run int) (Result, error) {
	p, err := t.run(ctx, dir)
	if err != nil {
		return Result{}, err
	}
	defer p.Stop()
	if err := p.WaitReady(20*time.Second, listeningOn67(ctx, nsServer)); err != nil {
		return Result{}, err
	}
	out := filepath.Join(dir, "perfdhcp.out")
	f, err := os.Create(out)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, o.duration+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "ip", append([]string{"netns", "exec", nsClient}, perfdhcpArgs(o, rate, run)...)...)
	cmd.Stdout, cmd.Stderr = f, f
	runErr := cmd.Run() // perfdhcp exits non-zero when it saw drops; the output decides
	if _, err := f.Seek(0, 0); err != nil {
		return Result{}, err
	}
	res, err := parsePerfdhcp(f)
	if err != nil {
		return res, fmt.Errorf("%w (perfdhcp: %v; output in %s)", err, runErr, out)
	}
	if how, exited := p.Exited(); exited {
		return res, fmt.Errorf("server %s during the run: %s", how, p.LogTail(1000))
	}
	return res, nil
}

func logMeasurement(m Measurement) {
	if m.Err != nil {
		fmt.Fprintf(os.Stderr, "dhcpbench: %-24s rate %5d run %d: FAILED: %v\n", m.Server, m.Rate, m.Run, m.Err)
		return
	}
	r := m.Result
	fmt.Fprintf(os.Stderr, "dhcpbench: %-24s rate %5d run %d: %8.1f DORA/s, %d/%d ACKed, drops %.1f%%\n",
		m.Server, m.Rate, m.Run, r.Rate, r.RA.Received, r.DO.Sent, r.DropPct())
}
