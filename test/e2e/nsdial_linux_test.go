package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// inNetns runs f on an OS thread moved into ns's network namespace, so
// the sockets f makes live there: a socket keeps the namespace it was made
// in, whichever thread uses it later. One thread per namespace does this
// work, one call at a time, and exits once idle for a while; it is never
// handed back to the scheduler (no UnlockOSThread), so nothing else ever
// runs in the namespace by accident, and a flood's thousands of dials do
// not cost a thread each.
func inNetns(ns *netns, f func() error) error {
	for {
		w, err := nsWorkerFor(ns)
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		select {
		case w.jobs <- func() { done <- f() }:
			return <-done
		case <-w.gone: // it went idle meanwhile; start another
		}
	}
}

// nsWorker is the thread that makes sockets in one namespace.
type nsWorker struct {
	jobs chan func()
	gone chan struct{}
}

var (
	nsWorkersMu sync.Mutex
	nsWorkers   = map[string]*nsWorker{}
)

const nsWorkerIdle = 2 * time.Second

func nsWorkerFor(ns *netns) (*nsWorker, error) {
	nsWorkersMu.Lock()
	defer nsWorkersMu.Unlock()
	if w := nsWorkers[ns.name]; w != nil {
		return w, nil
	}
	w := &nsWorker{jobs: make(chan func()), gone: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			started <- fmt.Errorf("enter namespace %s: %w", ns.name, err)
			return
		}
		started <- nil
		for {
			select {
			case j := <-w.jobs:
				j()
			case <-time.After(nsWorkerIdle):
				nsWorkersMu.Lock()
				delete(nsWorkers, ns.name)
				nsWorkersMu.Unlock()
				close(w.gone)
				return
			}
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	nsWorkers[ns.name] = w
	return w, nil
}

// dial connects to addr from inside ns.
func (ns *netns) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() (err error) {
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// httpClient is an HTTP client whose connections start inside ns.
func (ns *netns) httpClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return ns.dial(network, addr, timeout)
		},
	}}
}

// rootTarget fetches mac's iPXE script from inside ns, as the machine
// would, and returns the NBD root its kernel command line names. Each
// fetch makes a new per-boot export and voids the one before.
func rootTarget(t *testing.T, ns *netns, mac string) rootarg.Target {
	t.Helper()
	args := scriptCmdline(t, ns, mac)
	root, err := rootarg.FromCmdline(args)
	if err != nil {
		t.Fatalf("script of %s: kernel command line %q: %v", mac, args, err)
	}
	return root
}

// nbdConn is a plain NBD client for tests that must control every
// request: simple replies, as the kernel's client reads them.
type nbdConn struct {
	c    net.Conn
	r    *bufio.Reader
	size uint64
}

// attachNBD connects from ns to target and finishes the handshake.
func attachNBD(ns *netns, target rootarg.Target) (*nbdConn, error) {
	c, err := ns.dial("tcp", target.Addr(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	info, err := nbd.ClientHandshake(c, target.Export)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &nbdConn{c: c, r: bufio.NewReaderSize(c, 256<<10), size: info.Size}, nil
}

// send writes one request, and data after it for a WRITE.
func (n *nbdConn) send(req nbd.Request, data []byte) error {
	_, err := n.c.Write(append(nbd.AppendRequest(nil, req), data...))
	return err
}

// reply reads one simple reply; data is read only for a successful
// READ of length bytes (0 for other commands).
func (n *nbdConn) reply(length int) (handle uint64, e nbd.Errno, data []byte, err error) {
	var h [nbd.SimpleReplyLen]byte
	if _, err = io.ReadFull(n.r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	if handle, e, err = nbd.ParseSimpleReply(h[:]); err != nil || e != 0 || length == 0 {
		return handle, e, nil, err
	}
	data = make([]byte, length)
	_, err = io.ReadFull(n.r, data)
	return handle, e, data, err
}

// read reads length bytes at off, with nothing else in flight.
func (n *nbdConn) read(off uint64, length uint32) ([]byte, error) {
	n.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer n.c.SetDeadline(time.Time{})
	if err := n.send(nbd.Request{Type: nbd.CmdRead, Handle: off, Offset: off, Length: length}, nil); err != nil {
		return nil, err
	}
	h, e, data, err := n.reply(int(length))
	switch {
	case err != nil:
		return nil, err
	case e != 0 || h != off:
		return nil, fmt.Errorf("READ %d+%d: reply for handle %d with error %v", off, length, h, e)
	}
	return data, nil
}

func (n *nbdConn) close() {
	n.send(nbd.Request{Type: nbd.CmdDisc}, nil)
	n.c.Close()
}

// procStatusKB returns a "NAME: N kB" field of /proc/PID/status.
func procStatusKB(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, name)
}

// resetPeakRSS sets pid's VmHWM back to its current RSS (proc(5),
// clear_refs value 5), so the next reading is the peak from now on.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// cpuSeconds is the user and system CPU time pid has used (proc(5),
// stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}
