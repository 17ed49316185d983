package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test LAN. It exists only inside the test's namespaces, so every test
// can use the same addresses.
const (
	bridge   = "br0"
	serverIP = "10.213.0.1"
	prefix   = "/24"
)

// netns is a private network namespace deleted in t.Cleanup, which also
// removes every link inside it (bridge, taps, veth ends).
type netns struct {
	name string
}

// newLAN creates a namespace holding bridge br0 with serverIP on it: the
// network the VMs and the boot server share.
func newLAN(t testing.TB) *netns {
	t.Helper()
	ns := newNetns(t, "")
	ns.must(t, "link", "add", bridge, "type", "bridge")
	ns.must(t, "addr", "add", serverIP+prefix, "dev", bridge)
	ns.must(t, "link", "set", bridge, "up")
	return ns
}

func newNetns(t testing.TB, suffix string) *netns {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	ns := &netns{name: "bf-e2e-" + hex.EncodeToString(b) + suffix}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns.name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.name, err, out)
		}
	})
	ns.must(t, "link", "set", "lo", "up")
	return ns
}

// must runs `ip -n NS args...`.
func (ns *netns) must(t testing.TB, args ...string) {
	t.Helper()
	full := append([]string{"-n", ns.name}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(full, " "), err, out)
	}
}

// out runs name with args inside the namespace and returns its stdout.
func (ns *netns) out(t testing.TB, name string, args ...string) string {
	t.Helper()
	b, err := ns.command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s in %s: %v", name, strings.Join(args, " "), ns.name, err)
	}
	return string(b)
}

// addTap creates a tap device on br0 for one VM. It is created inside the
// namespace so QEMU, run there too, can open it by name.
func (ns *netns) addTap(t testing.TB, name string) {
	t.Helper()
	ns.must(t, "tuntap", "add", name, "mode", "tap")
	ns.must(t, "link", "set", name, "master", bridge)
	ns.must(t, "link", "set", name, "up")
}

// addPeer creates a second namespace wired to br0 by a veth pair, its end
// named eth0 with address addr (CIDR). A second DHCP server needs its own
// namespace because it binds UDP port 67 just as bootfleet does.
func (ns *netns) addPeer(t testing.TB, addr string) *netns {
	t.Helper()
	peer := newNetns(t, "-peer")
	// Named after the peer, so a LAN can have several.
	link := "vp" + strings.TrimPrefix(peer.name, "bf-e2e-")[:6]
	ns.must(t, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", peer.name)
	ns.must(t, "link", "set", link, "master", bridge)
	ns.must(t, "link", "set", link, "up")
	peer.must(t, "addr", "add", addr, "dev", "eth0")
	peer.must(t, "link", "set", "eth0", "up")
	// A new veth drops what it is given until the kernel's link watch
	// attaches its queue, up to a second later, and a UDP send is lost
	// without an error: wait until both ends say so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := strings.TrimSpace(ns.out(t, "cat", "/sys/class/net/"+link+"/operstate"))
		b := strings.TrimSpace(peer.out(t, "cat", "/sys/class/net/eth0/operstate"))
		if a == "up" && b == "up" {
			return peer
		}
		if time.Now().After(deadline) {
			t.Fatalf("veth %s and its peer's eth0 are %s and %s after 10 s, want both up", link, a, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// command returns cmd to run inside the namespace.
func (ns *netns) command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// waitTCP waits until something accepts TCP connections on addr:port in the
// namespace. It only connects, so it never counts as a client request.
func (ns *netns) waitTCP(addr string, port int, timeout time.Duration, alive func() error) error {
	deadline := time.Now().Add(timeout)
	probe := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", addr, port)
	for {
		if ns.command("bash", "-c", probe).Run() == nil {
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s:%d after %v", addr, port, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
