package agent

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// cacheWatchArg is argv[1] of the copy of the agent that watches the
// write cache fill.
const cacheWatchArg = "cachewatch"

// cacheWatchEvery is how often the cache watcher reads the snapshot's
// status: one ioctl, cheap, and often enough that the console says the
// cache is filling before it is full.
const cacheWatchEvery = 2 * time.Second

// startCacheWatcher starts a copy of the agent that reports the cache's
// fill level and, loudly, its overflow: once the snapshot's cache is full
// the kernel invalidates it and every I/O on the root fails. Like the
// reconnect watcher it outlives switch_root, so it holds its files open
// from the start: /dev/mapper/control (fd 3) and /dev/kmsg (fd 4), since
// the new root's /dev is out of its sight.
func (a *Agent) startCacheWatcher(o Options) error {
	self, err := os.Executable()
	if err != nil {
		self = "/init"
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	ctl, err := os.OpenFile(dmControl, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		kmsg = null
	} else {
		defer kmsg.Close()
	}
	attr := &os.ProcAttr{
		Env:   []string{"BOOTFLEET_MILESTONES=" + o.Milestones},
		Files: []*os.File{null, os.Stdout, os.Stderr, ctl, kmsg},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	p, err := os.StartProcess(self, []string{"@bootfleet-agent", cacheWatchArg, string(o.Cache.Mode)}, attr)
	if err != nil {
		return err
	}
	a.Log.Info("cache watcher started", "pid", p.Pid, "every", cacheWatchEvery)
	return p.Release()
}

// cacheWatchMain is the cache watcher: it polls the snapshot's status
// until the cache overflows, and says so on the console, in the kernel
// log at emergency level (every console and the journal) and to the
// server as the milestone agent-cache-full.
func (a *Agent) cacheWatchMain(args []string) {
	mode := "cache"
	if len(args) > 0 {
		mode = args[0]
	}
	ctl, kmsg := os.NewFile(3, dmControl), os.NewFile(4, "/dev/kmsg")
	opts := Options{Milestones: os.Getenv("BOOTFLEET_MILESTONES")}
	warned := 0
	for {
		time.Sleep(cacheWatchEvery)
		line, err := dmStatus(ctl, dmName)
		if err != nil {
			a.Log.Error("cache watcher: cannot read the cache's status; it stops watching", "err", err)
			return
		}
		u, err := ParseSnapshotStatus(line)
		if err != nil {
			a.Log.Error("cache watcher: unexpected status; it stops watching", "err", err)
			return
		}
		if u.Invalid {
			a.mark("BOOTFLEET-CACHE-FULL: the %s write cache overflowed; the kernel invalidated it and every read and write of the root now fails: reboot, and give the profile a larger bootfleet.cache.size= or a client-disk cache", mode)
			fmt.Fprintf(kmsg, "<0>bootfleet-agent: the %s write cache is full and invalidated; the root file system now fails all I/O; reboot\n", mode)
			a.milestone(opts, "agent-cache-full")
			return
		}
		if next := crossedLevels(u.Percent(), warned); next > warned {
			a.mark("BOOTFLEET-CACHE-FILL: %d%% of the %s write cache used (%d of %d MiB); at 100%% the root fails", u.Percent(), mode, u.Used>>11, u.Total>>11)
			fmt.Fprintf(kmsg, "<4>bootfleet-agent: %d%% of the %s write cache used\n", u.Percent(), mode)
			warned = next
		}
	}
}
