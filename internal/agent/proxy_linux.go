package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootarg"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// proxyArg is argv[1] of the copy of the agent that serves the root.
const proxyArg = "proxy"

// proxyKernelTimeout is the kernel's per-request timeout on the proxy's
// socket. The proxy answers every request within its give-up time (the
// dead-connection timeout), failing over between servers itself, so the
// kernel must never time a request out first: that would mark the
// socket dead with no watcher to replace it.
func proxyKernelTimeout(o Options) time.Duration {
	return proxyGiveUp(o) + o.IOTimeout
}

// proxyGiveUp is how long the proxy's requests wait for any server.
func proxyGiveUp(o Options) time.Duration { return max(o.DeadConn, o.IOTimeout) }

// startProxy starts the copy of the agent that serves the root (see
// proxyMain) on one end of a socket pair, runs the handshake on the
// other end and returns it, ready for the kernel. The proxy outlives
// switch_root as the reconnect watcher does, named @bootfleet-agent.
func (a *Agent) startProxy(o Options) (*net.UnixConn, nbd.Negotiated, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nbd.Negotiated{}, fmt.Errorf("socket pair for the root proxy: %w", err)
	}
	kernelEnd, proxyEnd := os.NewFile(uintptr(fds[0]), "nbd-kernel"), os.NewFile(uintptr(fds[1]), "nbd-proxy")
	defer kernelEnd.Close()
	defer proxyEnd.Close()
	self, err := os.Executable()
	if err != nil {
		self = "/init"
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nbd.Negotiated{}, err
	}
	defer null.Close()
	files := []*os.File{null, os.Stdout, os.Stderr, proxyEnd}
	if kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		defer kmsg.Close()
		files = append(files, kmsg)
	}
	// The proxy reads its options from /proc/cmdline, which stays
	// mounted: nothing secret passes through argv or the environment.
	p, err := os.StartProcess(self, []string{"@bootfleet-agent", proxyArg}, &os.ProcAttr{Files: files, Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		return nil, nbd.Negotiated{}, fmt.Errorf("start the root proxy: %w", err)
	}
	a.Log.Info("root proxy started", "pid", p.Pid)
	p.Release()
	fc, err := net.FileConn(kernelEnd)
	if err != nil {
		return nil, nbd.Negotiated{}, err
	}
	conn := fc.(*net.UnixConn)
	// The proxy dials the servers first, for up to its give-up time.
	conn.SetDeadline(time.Now().Add(proxyGiveUp(o) + 30*time.Second))
	info, err := nbd.ClientHandshake(conn, rootproxy.ExportName)
	if err != nil {
		conn.Close()
		return nil, nbd.Negotiated{}, fmt.Errorf("handshake with the root proxy (its log lines say why it stopped): %w", err)
	}
	conn.SetDeadline(time.Time{})
	return conn, info, nil
}

// proxyMain is the root proxy: it dials the servers, builds the cache
// and the multicast receiver, and serves the kernel on fd 3 until the
// machine is off.
func (a *Agent) proxyMain() {
	if err := rootproxy.HardenForIO(); err != nil {
		a.Log.Warn("root proxy: not protected against memory pressure", "err", err)
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		a.Log.Error("root proxy: read /proc/cmdline", "err", err)
		return
	}
	o, err := ParseCmdline(string(cmdline))
	if err != nil {
		a.Log.Error("root proxy: command line", "err", err)
		return
	}
	var kmsg *os.File
	if f := os.NewFile(4, "/dev/kmsg"); f != nil {
		if _, err := f.Stat(); err == nil {
			kmsg = f
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		a.mark("BOOTFLEET-PROXY-STOPPED: %v", sig)
		os.Exit(1)
	}()
	servers := o.Root.Servers()
	rot := newRotation(len(servers), len(servers)-1)
	cur := 0
	dial := func(ctx context.Context, attempt int) (net.Conn, nbd.Negotiated, string, error) {
		i, wait := rot.next()
		time.Sleep(wait)
		conn, info, err := dialAndHandshake(ctx, servers[i], o.Root.Export)
		if err == nil {
			cur = i
			a.Log.Info("nbd handshake done", "server", servers[i].Addr(), "size", info.Size, "flags", fmt.Sprintf("%#x", uint16(info.Flags)), "attempt", attempt, "by", "proxy")
			return conn, info, servers[i].Addr(), nil
		}
		if attempt <= len(servers) || attempt%10 == 0 {
			a.Log.Warn("root proxy: server did not answer", "server", servers[i].Addr(), "attempt", attempt, "err", err)
		}
		return nil, nbd.Negotiated{}, servers[i].Addr(), err
	}
	onFailover := func(from, to string, after time.Duration) {
		a.mark("BOOTFLEET-NBD-RECONNECTED: /dev/nbd%d server=%s from=%s after=%.3fs by=proxy", nbdIndex, to, from, after.Seconds())
		if kmsg != nil {
			fmt.Fprintf(kmsg, "<5>bootfleet-agent: root proxy moved to %s (was %s) after %.3fs\n", to, from, after.Seconds())
		}
		if o.Milestones != "" {
			fromSrv, _ := serverByAddr(servers, from)
			(&watcher{Agent: a}).report(reconnectReport(o.Milestones, servers[cur], fromSrv, o.Root.Export, after))
		}
	}
	up, err := rootproxy.NewUpstream(context.Background(), rootproxy.UpstreamConfig{Dial: dial, Timeout: o.IOTimeout,
		GiveUp: proxyGiveUp(o), Logger: a.Log, OnFailover: onFailover})
	if err != nil {
		a.Log.Error("root proxy: no server", "err", err)
		return
	}
	cfg, err := a.proxyConfig(o, up)
	if err != nil {
		a.Log.Error("root proxy", "err", err)
		return
	}
	p, err := rootproxy.New(cfg)
	if err != nil {
		a.Log.Error("root proxy", "err", err)
		return
	}
	a.Log.Info("root proxy serving", "size", up.Info().Size, "read_cache", p.CacheBytes(), "multicast", o.HasMulticast, "overlay_known", cfg.Base,
		"group_read_buffer", p.Stats().GroupReadBuffer)
	ctx := context.Background()
	go p.Run(ctx)
	go a.reportRootIO(o, p)
	fc, err := net.FileConn(os.NewFile(3, "nbd-proxy"))
	if err != nil {
		a.Log.Error("root proxy: the kernel's socket", "err", err)
		return
	}
	err = p.Serve(ctx, fc, nbd.Config{Logger: a.Log, MaxInFlight: 16})
	a.Log.Warn("root proxy: the kernel's session ended", "err", err)
}

func serverByAddr(servers []rootarg.Server, addr string) (rootarg.Server, bool) {
	for _, s := range servers {
		if s.Addr() == addr {
			return s, true
		}
	}
	return rootarg.Server{}, false
}

// proxyConfig is ProxyConfig for this machine: its RAM, and the group
// joined on the interface that reaches the server.
func (a *Agent) proxyConfig(o Options, up *rootproxy.Upstream) (rootproxy.Config, error) {
	mem, err := memTotal()
	if err != nil && !o.ReadCacheSet {
		return rootproxy.Config{}, err
	}
	cfg, err := ProxyConfig(o, up, mem, nil, a.Log)
	if cfg.Multicast != nil {
		cfg.Multicast.Interface = routeInterface(o.Multicast.Server.Addr())
	}
	return cfg, err
}

// routeInterface is the interface whose address is on the server's
// subnet, so the group is joined where the server sends it; nil leaves
// it to the routing table.
func routeInterface(server netip.Addr) *net.Interface {
	ifs, _ := net.Interfaces()
	for i := range ifs {
		addrs, _ := ifs[i].Addrs()
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && n.Contains(net.IP(server.AsSlice())) {
				return &ifs[i]
			}
		}
	}
	return nil
}

// Root I/O reports: first after rootIOFirst, then at doubling intervals
// up to rootIOMax, each only if a counter moved; a boot's reads are in
// the first minute, a running machine's later ones change little.
const (
	rootIOFirst = 5 * time.Second
	rootIOMax   = 5 * time.Minute
)

// reportRootIO sends the proxy's counters to the server, for ever.
func (a *Agent) reportRootIO(o Options, p *rootproxy.Proxy) {
	if o.Milestones == "" {
		return
	}
	w := &watcher{Agent: a}
	var last rootproxy.Stats
	for wait := rootIOFirst; ; wait = min(2*wait, rootIOMax) {
		time.Sleep(wait)
		st := p.Stats()
		if st == last {
			continue
		}
		last = st
		w.report(o.Milestones + "/" + RootIOMilestone + "?" + RootIOQuery(st))
	}
}
