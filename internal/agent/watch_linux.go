package agent

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// startWatcher starts a copy of the agent that reconnects the NBD socket
// after a link dies. It runs from the initramfs, which switch_root empties;
// the running binary stays in memory and it needs no files, only netlink
// and TCP. The export name reaches it in the environment, not in argv, so
// `ps` in the new root does not show the secret.
func (a *Agent) startWatcher(o Options) error {
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
	attr := &os.ProcAttr{
		Env:   []string{"BOOTFLEET_NBD_HOST=" + o.Root.Host, "BOOTFLEET_NBD_PORT=" + strconv.Itoa(o.Root.Port), "BOOTFLEET_NBD_EXPORT=" + o.Root.Export},
		Files: []*os.File{null, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	// argv[0] starting with '@' marks a root storage daemon: systemd's
	// final kill at shutdown spares it, so the root disk keeps its
	// reconnection until the root is unmounted.
	p, err := os.StartProcess(self, []string{"@bootfleet-agent", watchArg, strconv.Itoa(nbdIndex)}, attr)
	if err != nil {
		return err
	}
	a.Log.Info("reconnect watcher started", "pid", p.Pid, "dead_conn_timeout", o.DeadConn)
	return p.Release()
}

// watchMain is the watcher: wait for NBD_CMD_LINK_DEAD, reconnect, repeat.
func (a *Agent) watchMain(args []string) {
	t := Target{Host: os.Getenv("BOOTFLEET_NBD_HOST"), Export: os.Getenv("BOOTFLEET_NBD_EXPORT")}
	t.Port, _ = strconv.Atoi(os.Getenv("BOOTFLEET_NBD_PORT"))
	index := uint64(nbdIndex)
	if len(args) > 0 {
		index, _ = strconv.ParseUint(args[0], 10, 32)
	}
	nl, err := dialNBDNetlink()
	if err == nil {
		err = nl.Subscribe()
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
		if err := nl.WaitLinkDead(uint32(index)); err != nil {
			a.Log.Error("watcher: netlink failed", "err", err)
			return
		}
		a.Log.Warn("nbd link dead; reconnecting", "dev", fmt.Sprintf("nbd%d", index), "server", t.Addr())
		a.reconnect(nl, uint32(index), t)
	}
}

// reconnect retries with a capped backoff; the kernel fails I/O on its own
// once the dead-connection timeout passes, so retrying longer is harmless.
func (a *Agent) reconnect(nl *genlConn, index uint32, t Target) {
	delay := 250 * time.Millisecond
	for i := 1; i <= 1000; i++ {
		conn, _, err := dialAndHandshake(context.Background(), t)
		if err == nil {
			err = nl.Reconfigure(index, conn)
			conn.Close()
			if err == nil {
				a.mark("BOOTFLEET-NBD-RECONNECTED: /dev/nbd%d attempt=%d", index, i)
				return
			}
		}
		if i == 1 || i%10 == 0 {
			a.Log.Warn("nbd reconnect failed", "attempt", i, "err", err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
}
