package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What TestNBDFailover reads from its VMs: the loops' reports over HTTP
// and the consoles' markers.

// loopReport is one round the VM's loop reported.
type loopReport struct {
	at  time.Time
	seq int
	ok  bool
	err string
}

// reportListener collects the loop's reports; stop makes it answer "stop".
type reportListener struct {
	mu      sync.Mutex
	reports []loopReport
	stop    bool
	arrived chan struct{} // one value per report, never blocks the handler
}

func (l *reportListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seq, _ := strconv.Atoi(r.URL.Query().Get("seq"))
	rep := loopReport{at: time.Now(), seq: seq, ok: r.URL.Query().Get("ok") == "1", err: r.URL.Query().Get("err")}
	l.mu.Lock()
	l.reports = append(l.reports, rep)
	stop := l.stop
	l.mu.Unlock()
	select {
	case l.arrived <- struct{}{}:
	default:
	}
	if stop {
		fmt.Fprint(w, "stop")
		return
	}
	fmt.Fprint(w, "go")
}

func (l *reportListener) setStop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stop = true
}

func (l *reportListener) snapshot() []loopReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reports)
}

// waitFor waits until pred holds for the reports of vm so far.
func (l *reportListener) waitFor(timeout time.Duration, vm *proc, pred func([]loopReport) bool) bool {
	deadline := time.After(timeout)
	for {
		if pred(l.snapshot()) {
			return true
		}
		select {
		case <-l.arrived:
		case <-time.After(time.Second):
		case <-vm.exited: // a panic or a power-off: no more reports
			return pred(l.snapshot())
		case <-deadline:
			return pred(l.snapshot())
		}
	}
}

// listenReports serves l on addr inside ns.
func listenReports(t *testing.T, ns *netns, addr string, l http.Handler) {
	t.Helper()
	var ln net.Listener
	if err := inNetns(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("report listener: %v", err)
	}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// goodRounds holds once n good rounds arrived after since.
func goodRounds(since time.Time, n int) func([]loopReport) bool {
	return func(rs []loopReport) bool {
		k := 0
		for _, r := range rs {
			if r.ok && r.at.After(since) {
				k++
			}
		}
		return k >= n
	}
}

// rootServers is the HOST:PORT list of bootfleet.root= in cmdline.
func rootServers(cmdline string) []string {
	for _, w := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(w, "bootfleet.root=nbd:"); ok {
			var out []string
			for _, hp := range strings.Split(v[:strings.LastIndex(v, ":")], ",") {
				out = append(out, hp)
			}
			return out
		}
	}
	return nil
}

// failoverConsole is what a failover VM's console said.
type failoverConsole struct {
	mu          sync.Mutex
	cmdline     string
	connected   string   // the server of the agent's first NBD handshake
	cache       string   // the BOOTFLEET-CACHE line, after the prefix
	loopDir     string   // where the loop writes: /var/fo on a writable root
	reconnected string   // the latest BOOTFLEET-NBD-RECONNECTED, after the prefix
	errs        []string // lines that prove an error reached the VM
}

func watchFailoverConsole(q *proc) *failoverConsole {
	c := &failoverConsole{}
	go q.waitLine(context.Background(), func(line string) (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case strings.HasPrefix(line, "BOOTFLEET-CMDLINE: "):
			c.cmdline = strings.TrimPrefix(line, "BOOTFLEET-CMDLINE: ")
		case strings.Contains(line, `msg="nbd handshake done"`) && c.connected == "":
			c.connected = parseLogfmt(line)["server"]
		case strings.HasPrefix(line, "BOOTFLEET-LOOP-DIR: "):
			c.loopDir = strings.TrimPrefix(line, "BOOTFLEET-LOOP-DIR: ")
		case strings.HasPrefix(line, "BOOTFLEET-CACHE: "):
			c.cache = strings.TrimPrefix(line, "BOOTFLEET-CACHE: ")
		case strings.HasPrefix(line, "BOOTFLEET-NBD-RECONNECTED: "):
			c.reconnected = strings.TrimPrefix(line, "BOOTFLEET-NBD-RECONNECTED: ")
		case strings.Contains(line, "I/O error"), strings.Contains(line, "EXT4-fs error"), strings.HasPrefix(line, "BOOTFLEET-FAIL"),
			strings.Contains(line, "Kernel panic"), strings.Contains(line, "ok=0"), strings.HasPrefix(line, "BOOTFLEET-CACHE-FULL"):
			c.errs = append(c.errs, line)
		}
		return false, nil
	})
	return c
}

// get copies the fields under the lock.
func (c *failoverConsole) get() failoverConsole {
	c.mu.Lock()
	defer c.mu.Unlock()
	return failoverConsole{cmdline: c.cmdline, connected: c.connected, cache: c.cache, loopDir: c.loopDir, reconnected: c.reconnected, errs: slices.Clone(c.errs)}
}

func (c *failoverConsole) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reconnected = ""
}

// reportGaps returns the longest gap between consecutive reports that
// spans killedAt, and the median gap of all of them.
func reportGaps(rs []loopReport, killedAt time.Time) (pause, median time.Duration) {
	var gaps []time.Duration
	for i := 1; i < len(rs); i++ {
		g := rs[i].at.Sub(rs[i-1].at)
		gaps = append(gaps, g)
		if !rs[i-1].at.After(killedAt) && rs[i].at.After(killedAt) {
			pause = g
		}
	}
	if len(gaps) == 0 {
		return 0, 0
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	return pause, gaps[len(gaps)/2]
}

// writeFailoverFigure appends one run's figures to failover-runs.txt in
// the artifacts, for BENCHMARKS-failover.md.
func writeFailoverFigure(t *testing.T, dir, victim string, pause, gap time.Duration, agentAfter string) {
	f, err := os.OpenFile(filepath.Join(dir, "failover-runs.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("failover figures not written: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s killed=%s gap_across_kill=%.3fs median_gap=%.3fs pause=%.3fs agent_reconnect=%s\n",
		time.Now().UTC().Format(time.RFC3339), victim, pause.Seconds(), gap.Seconds(), (pause - gap).Seconds(), agentAfter)
}
