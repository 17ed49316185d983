package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NeedNetns skips t unless it can make network namespaces (root and
// iproute2's ip), except under BOOTFLEET_CI=1, where that is a failure.
func NeedNetns(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipUnlessCI(t, "needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		SkipUnlessCI(t, "needs iproute2's ip")
	}
}

// VethPair creates two namespaces joined by a veth pair: srv holding
// srvLink and cli holding cliLink, both up, with no addresses but the
// kernel's own. Two namespaces, because within one, traffic between local
// addresses takes lo and never reaches the interface a server is bound to.
// tag names them in `ip netns list`. Both are removed when the test ends.
func VethPair(t testing.TB, tag, srvLink, cliLink string, beforeUp ...func(srv, cli string)) (srv, cli string) {
	t.Helper()
	base := fmt.Sprintf("bf-%s-%d-%d", tag, os.Getpid(), time.Now().UnixNano()%100000)
	srv, cli = base+"s", base+"c"
	for _, ns := range []string{srv, cli} {
		IP(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		IP(t, "-n", ns, "link", "set", "lo", "up")
	}
	IP(t, "-n", srv, "link", "add", srvLink, "type", "veth", "peer", "name", cliLink, "netns", cli)
	for _, f := range beforeUp {
		f(srv, cli)
	}
	IP(t, "-n", srv, "link", "set", srvLink, "up")
	IP(t, "-n", cli, "link", "set", cliLink, "up")
	return srv, cli
}

// IP runs iproute2's ip with args and fails t if it fails.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// InNetns runs fn on an OS thread moved into ns. The thread is never moved
// back: the goroutine exits still locked, so Go discards the thread.
// Sockets fn creates stay in ns whichever thread later uses them.
func InNetns(t testing.TB, ns string, fn func()) {
	t.Helper()
	if err := <-GoNetns(ns, fn); err != nil {
		t.Fatal(err)
	}
}

// GoNetns starts fn in ns and reports setup errors, or nil once fn returns.
func GoNetns(ns string, fn func()) <-chan error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		fn()
		errc <- nil
	}()
	return errc
}

// ServeInNetns runs serve in ns until the test ends; then it cancels serve's
// context and fails t unless serve returns nil within 5 s. The channel
// reports an error entering ns.
func ServeInNetns(t testing.TB, ns string, serve func(ctx context.Context) error) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	nsErr := GoNetns(ns, func() { done <- serve(ctx) })
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve in %s: %v", ns, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("serve in %s did not return within 5 s of cancel", ns)
		}
	})
	return nsErr
}

// GroupPair is VethPair with srvIP and cliIP (/24) on the two links and
// the multicast groups (239.0.0.0/8) routed over them, as on a LAN.
func GroupPair(t testing.TB, tag, srvLink, cliLink, srvIP, cliIP string) (srv, cli string) {
	t.Helper()
	srv, cli = VethPair(t, tag, srvLink, cliLink)
	IP(t, "-n", srv, "addr", "add", srvIP+"/24", "dev", srvLink)
	IP(t, "-n", cli, "addr", "add", cliIP+"/24", "dev", cliLink)
	for _, ns := range []struct{ ns, link string }{{srv, srvLink}, {cli, cliLink}} {
		IP(t, "-n", ns.ns, "route", "add", "239.0.0.0/8", "dev", ns.link)
	}
	return srv, cli
}
