package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// startWatcher starts a copy of the agent that reconnects the NBD socket
// after a link dies. It runs from the initramfs, which switch_root empties;
// the running binary stays in memory and it needs no files, only netlink
// and TCP. The export name reaches it in the environment, not in argv, so
// `ps` in the new root does not show the secret. current is the index of
// the server the device is connected to now.
func (a *Agent) startWatcher(o Options, current int) error {
	if o.DeadConn == 0 {
		return fmt.Errorf("bootfleet.nbd.dead=0 disables reconnection")
	}
	self, err := os.Executable()
	if err != nil {
		self = "/init"
	}
	// A closed standard input makes the Go runtime open /dev/null at
	// start, which races with the agent moving /dev into the new root.
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	files := []*os.File{null, os.Stdout, os.Stderr}
	// /dev/kmsg moves into the new root with /dev; the watcher keeps an
	// open descriptor (fd 3) so its reconnects reach dmesg and the journal.
	if kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		defer kmsg.Close()
		files = append(files, kmsg)
	}
	attr := &os.ProcAttr{
		Env: []string{"BOOTFLEET_NBD_ROOT=" + o.Root.Arg(), "BOOTFLEET_NBD_CURRENT=" + strconv.Itoa(current),
			"BOOTFLEET_MILESTONES=" + o.Milestones},
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	// argv[0] starting with '@' marks a root storage daemon: systemd's
	// final kill at shutdown spares it, so the root disk keeps its
	// reconnection until the root is unmounted.
	p, err := os.StartProcess(self, []string{"@bootfleet-agent", watchArg, strconv.Itoa(nbdIndex)}, attr)
	if err != nil {
		return err
	}
	a.Log.Info("reconnect watcher started", "pid", p.Pid, "dead_conn_timeout", o.DeadConn, "servers", len(o.Root.Servers()))
	return p.Release()
}

// watcher is the state of the watcher process.
type watcher struct {
	*Agent
	nl         *genlConn
	index      uint32
	target     rootarg.Target
	cur        int    // index in target.Servers() of the server in use
	milestones string // bootfleet.milestones=, "" for none
	kmsg       *os.File
}

// watchMain is the watcher: wait for NBD_CMD_LINK_DEAD, reconnect, repeat.
func (a *Agent) watchMain(args []string) {
	w := &watcher{Agent: a, index: nbdIndex, milestones: os.Getenv("BOOTFLEET_MILESTONES")}
	var err error
	if w.target, err = rootarg.Parse(os.Getenv("BOOTFLEET_NBD_ROOT")); err != nil {
		a.Log.Error("watcher: no root to watch", "err", err)
		return
	}
	w.cur, _ = strconv.Atoi(os.Getenv("BOOTFLEET_NBD_CURRENT"))
	if w.cur < 0 || w.cur >= len(w.target.Servers()) {
		w.cur = 0
	}
	if len(args) > 0 {
		if i, err := strconv.ParseUint(args[0], 10, 32); err == nil {
			w.index = uint32(i)
		}
	}
	if f := os.NewFile(3, "/dev/kmsg"); f != nil {
		if _, err := f.Stat(); err == nil {
			w.kmsg = f
		}
	}
	w.nl, err = dialNBDNetlink()
	if err == nil {
		err = w.nl.Subscribe()
	}
	if err != nil {
		a.Log.Error("watcher: cannot listen for dead NBD links", "err", err)
		return
	}
	// Being killed leaves the root without reconnection; say so where the
	// console shows it (a shutdown that kills it breaks the
	// root-storage-daemon convention startWatcher relies on).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		a.mark("BOOTFLEET-WATCHER-STOPPED: %v", sig)
		os.Exit(1)
	}()
	for {
		if err := w.nl.WaitLinkDead(w.index); err != nil {
			a.Log.Error("watcher: netlink failed", "err", err)
			return
		}
		a.Log.Warn("nbd link dead; reconnecting", "dev", fmt.Sprintf("nbd%d", w.index), "server", w.target.Servers()[w.cur].Addr())
		w.reconnect()
	}
}

// maxReconnectAttempts bounds one reconnect. The kernel fails I/O on its
// own once the dead-connection timeout passes, so trying longer is
// harmless, and with the pauses this is over an hour.
const maxReconnectAttempts = 1000

// reconnect tries the servers round robin, starting after the one that
// failed, until one accepts the export and the kernel takes the socket.
func (w *watcher) reconnect() {
	servers := w.target.Servers()
	from := servers[w.cur]
	start := time.Now()
	rot := newRotation(len(servers), w.cur)
	for attempt := 1; attempt <= maxReconnectAttempts; attempt++ {
		i, wait := rot.next()
		time.Sleep(wait)
		conn, _, err := dialAndHandshake(context.Background(), servers[i], w.target.Export)
		if err == nil {
			err = w.nl.Reconfigure(w.index, conn)
			conn.Close()
		}
		if err != nil {
			if attempt <= len(servers) || attempt%10 == 0 {
				w.Log.Warn("nbd reconnect failed", "attempt", attempt, "server", servers[i].Addr(), "err", err)
			}
			continue
		}
		w.cur = i
		after := time.Since(start)
		w.mark("BOOTFLEET-NBD-RECONNECTED: /dev/nbd%d server=%s from=%s after=%.3fs attempt=%d",
			w.index, servers[i].Addr(), from.Addr(), after.Seconds(), attempt)
		if w.kmsg != nil {
			fmt.Fprintf(w.kmsg, "<5>bootfleet-agent: nbd%d reconnected to %s (was %s) after %.3fs, attempt %d\n",
				w.index, servers[i].Addr(), from.Addr(), after.Seconds(), attempt)
		}
		if w.milestones != "" {
			w.report(reconnectReport(w.milestones, servers[i], from, w.target.Export, after))
		}
		return
	}
	w.Log.Error("nbd reconnect gave up; the root's I/O fails", "attempts", maxReconnectAttempts, "servers", len(servers))
}

// report GETs a milestone URL, best effort, as Agent.milestone does.
func (w *watcher) report(u string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		w.Log.Warn("reconnect not reported to the server", "err", err)
		return
	}
	resp.Body.Close()
}
