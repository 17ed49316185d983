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

// The fleet bench's LAN: a bridge in a namespace of its own, each server
// and the client in their own namespace on it, as machines on one switch.
const (
	fleetSwitch   = "bf-dflt-sw"
	fleetClientNS = "bf-dflt-cli"
	fleetDev      = "eth0" // every namespace's port on the bridge
	fleetPrefix   = "10.217"
	fleetClientIP = fleetPrefix + ".0.100"
	fleetPoolLo   = fleetPrefix + ".1.0"
	fleetPoolHi   = fleetPrefix + ".254.255"
	fleetServers  = 3
)

func fleetServerNS(i int) string { return fmt.Sprintf("bf-dflt-s%d", i) }
func fleetServerIP(i int) string { return fmt.Sprintf("%s.0.%d", fleetPrefix, i) }

func parseFleetFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("dhcp-fleet", flag.ContinueOnError)
	rates := o.runFlags(fs, "BENCHMARKS-dhcp-fleet.md", "1000,4000", "one a server keeps up with, one it may not", "fleet size")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.check(*rates)
}

// fleetLAN builds the switch namespace with its bridge and one port per
// server and for the client, and returns the commands and a cleanup.
func fleetLAN(ctx context.Context) ([]string, func(), error) {
	var all []string
	for i := 1; i <= fleetServers; i++ {
		all = append(all, fleetServerNS(i))
	}
	all = append(all, fleetClientNS, fleetSwitch)
	cleanup := func() { harness.DeleteNamespaces(all...) }
	cleanup()
	steps := [][]string{
		{"ip", "netns", "add", fleetSwitch},
		{"ip", "-n", fleetSwitch, "link", "add", "name", "sw0", "type", "bridge"},
		{"ip", "-n", fleetSwitch, "link", "set", "sw0", "up"},
	}
	port := func(ns, addr string, n int) {
		p := fmt.Sprintf("p%d", n)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", fleetSwitch, "link", "add", p, "type", "veth", "peer", "name", fleetDev, "netns", ns},
			[]string{"ip", "-n", fleetSwitch, "link", "set", p, "master", "sw0", "up"},
			[]string{"ip", "-n", ns, "addr", "add", addr + "/16", "dev", fleetDev},
			[]string{"ip", "-n", ns, "link", "set", fleetDev, "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	for i := 1; i <= fleetServers; i++ {
		port(fleetServerNS(i), fleetServerIP(i), i)
	}
	port(fleetClientNS, fleetClientIP, 0)
	var cmds []string
	for _, s := range steps {
		if err := harness.Sh(ctx, s[0], s[1:]...); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("build the fleet LAN: %w", err)
		}
		cmds = append(cmds, harness.ShellJoin(s))
	}
	return cmds, cleanup, nil
}

// fleetConfigText is server i's config: full DHCP over the shared pool,
// its own name and address, everything else off or placeholder.
func fleetConfigText(dir string, i int) string {
	return fmt.Sprintf(`interface: %s
server_ip: %s
server: {name: s%d}
data: %s/data
dhcp: {mode: full, range: %s-%s, lease: 1h}
tftp: {listen: "off"}
http: {listen: "%s:8080"}
ipxe: {dir: %s/ipxe}   # placeholder ipxe.efi and undionly.kpxe
log: {level: warn}
`, fleetDev, fleetServerIP(i), i, dir, fleetPoolLo, fleetPoolHi, fleetServerIP(i), dir)
}

// fleetMeasurement is one perfdhcp run against a fleet of Servers.
type fleetMeasurement struct {
	Measurement
	Servers       int
	Leases, IPs   int     // rows in the lease table, distinct addresses among them
	ServerCPU     float64 // CPU seconds of every bootfleet process together
	ReadyAfter    time.Duration
	ServersAnswer string // how many live servers the table showed before the run
}

// FleetMain measures DORA/s of one bootfleet server and of three sharing
// one PostgreSQL on one LAN, with the same broadcast client, and writes
// the report.
func FleetMain(ctx context.Context, args []string) error {
	o, err := parseFleetFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces, port 67)")
	}
	lk, err := harness.Lock(lockFile)
	if err != nil {
		return err
	}
	defer lk.Close()
	work, err := os.MkdirTemp(o.work, "bf-dhcpfleet-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(work)
	}
	topo, cleanup, err := fleetLAN(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	db, err := startPG(ctx, o.pgtest, fleetServerNS(1), []string{fleetServerIP(1)}, fleetPrefix+".0.0/16")
	if db != nil {
		defer db.stop()
	}
	if err != nil {
		return err
	}
	host := harness.DescribeHost(ctx)
	pgSettings := db.settings(ctx)
	start := time.Now()
	loadBefore := harness.LoadAvg()
	var ms []fleetMeasurement
	for _, rate := range o.rates {
		for r := 1; r <= o.runs; r++ {
			for _, n := range harness.Rotate([]int{1, fleetServers}, r) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				dir := filepath.Join(work, fmt.Sprintf("rate%d-run%d-n%d", rate, r, n))
				m := measureFleet(ctx, o, db, dir, n, rate, r)
				ms = append(ms, m)
				logMeasurement(m.Measurement)
			}
		}
	}
	rep := fleetReport{o: o, host: host, pg: pgSettings, topo: topo, ms: ms,
		loadBefore: loadBefore, loadAfter: harness.LoadAvg(), elapsed: time.Since(start).Round(time.Second)}
	if err := os.WriteFile(o.out, []byte(rep.render()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dhcp-fleet: wrote %s (%v)\n", o.out, rep.elapsed)
	return nil
}

func measureFleet(ctx context.Context, o options, db *pg, dir string, n, rate, run int) fleetMeasurement {
	m := fleetMeasurement{Measurement: Measurement{Server: fmt.Sprintf("%d server(s)", n), Rate: rate, Run: run}, Servers: n}
	fail := func(err error) fleetMeasurement { m.Err = err; return m }
	dsn, err := db.freshDSN(ctx)
	if err != nil {
		return fail(err)
	}
	dsn = strings.Replace(dsn, "127.0.0.1:", fleetServerIP(1)+":", 1)
	var procs []*harness.Proc
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	t0 := time.Now()
	for i := 1; i <= n; i++ {
		sdir := filepath.Join(dir, fmt.Sprintf("s%d", i))
		if _, err := bootfleetConfig(sdir); err != nil {
			return fail(err)
		}
		cfg := filepath.Join(sdir, "fleet.yaml")
		if err := os.WriteFile(cfg, []byte(fleetConfigText(sdir, i)), 0o644); err != nil {
			return fail(err)
		}
		p, err := harness.Start(fmt.Sprintf("dhcp-s%d", i), fleetServerNS(i), filepath.Join(sdir, "server.log"), nil,
			o.bootfleet, "serve", "--config", cfg, "--store", dsn)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
	}
	for i, p := range procs {
		if err := p.WaitReady(30*time.Second, listeningOn67(ctx, fleetServerNS(i+1))); err != nil {
			return fail(err)
		}
	}
	// Every server must see the others live before the run, or each
	// would answer every client as if alone.
	if err := waitLive(ctx, db, dsn, n, 40*time.Second); err != nil {
		return fail(err)
	}
	time.Sleep(6 * time.Second) // one fleet view refresh (5 s) after the last registration
	m.ReadyAfter = time.Since(t0).Round(100 * time.Millisecond)

	out := filepath.Join(dir, "perfdhcp.out")
	f, err := os.Create(out)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, o.duration+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "ip", append([]string{"netns", "exec", fleetClientNS}, fleetPerfdhcpArgs(o, rate, run)...)...)
	cmd.Stdout, cmd.Stderr = f, f
	runErr := cmd.Run()
	if _, err := f.Seek(0, 0); err != nil {
		return fail(err)
	}
	res, err := parsePerfdhcp(f)
	m.Result = res
	if err != nil {
		return fail(fmt.Errorf("%w (perfdhcp: %v; output in %s)", err, runErr, out))
	}
	for _, p := range procs {
		if how, exited := p.Exited(); exited {
			return fail(fmt.Errorf("a server %s during the run: %s", how, p.LogTail(1000)))
		}
		m.ServerCPU += p.CPU()
	}
	leases, ips, err := db.leaseCounts(ctx, dsn)
	if err != nil {
		return fail(err)
	}
	m.Leases, m.IPs = leases, ips
	if leases != ips {
		return fail(fmt.Errorf("%d leases hold only %d distinct addresses: an address was leased twice", leases, ips))
	}
	return m
}

// fleetPerfdhcpArgs: with -l and no server, perfdhcp broadcasts, so every
// server on the LAN sees every DISCOVER, as from real clients.
func fleetPerfdhcpArgs(o options, rate, run int) []string {
	return []string{o.perfdhcp, "-4", "-l", fleetDev, "-r", strconv.Itoa(rate), "-R", strconv.Itoa(o.clients),
		"-p", strconv.Itoa(int(o.duration.Seconds())), "-s", strconv.Itoa(run), "-x", "t"}
}

// waitLive waits until the servers table of dsn's database shows n live
// servers.
func waitLive(ctx context.Context, db *pg, dsn string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := db.query(ctx, dsn, "SELECT count(*) FROM servers WHERE stopped IS NULL AND heartbeat > now() - interval '30 seconds'")
		if err == nil && strings.TrimSpace(out) == strconv.Itoa(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("want %d live servers in the servers table within %v, got %q (%v)", n, timeout, strings.TrimSpace(out), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// query runs q in dsn's database as the superuser, over the socket.
func (p *pg) query(ctx context.Context, dsn, q string) (string, error) {
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	return harness.Output(ctx, "runuser", "-u", "postgres", "--", "psql", "-X", "-At", "-h", p.dir, "-p", p.port,
		"-U", "postgres", "-d", db, "-c", q)
}

func (p *pg) leaseCounts(ctx context.Context, dsn string) (leases, ips int, err error) {
	out, err := p.query(ctx, dsn, "SELECT count(*) || ' ' || count(DISTINCT ip) FROM leases")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(strings.TrimSpace(out), &leases, &ips); err != nil {
		return 0, 0, fmt.Errorf("lease counts: want two numbers, got %q", out)
	}
	return leases, ips, nil
}
