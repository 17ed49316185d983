package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv6"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// These tests run the real server on a real ICMPv6 socket: the server's
// namespace holds bfs0, the client's bfc0, joined by a veth pair; the
// client is a raw ICMPv6 socket that plays iPXE (and, in one test, a router).

// ndpNetns makes the pair with duplicate address detection off (so the
// link-local addresses are usable at once) and the client kernel's own
// solicitations off (so every solicitation the server sees is the test's).
// With serverIPv6 false the server's end starts with IPv6 disabled.
func ndpNetns(t *testing.T, serverIPv6 bool) (srv, cli string) {
	t.Helper()
	testutil.NeedNetns(t)
	srv, cli = testutil.VethPair(t, "ndpt", "bfs0", "bfc0", func(srv, cli string) {
		quietPair(t, srv, cli)
		if !serverIPv6 {
			sysctl(t, srv, "net.ipv6.conf.bfs0.disable_ipv6=1")
		}
	})
	if serverIPv6 {
		waitLinkLocal(t, srv, "bfs0")
	}
	waitLinkLocal(t, cli, "bfc0")
	return srv, cli
}

// quietPair turns off duplicate address detection on both ends and the
// client kernel's own router solicitations, before the links come up.
func quietPair(t *testing.T, srv, cli string) {
	t.Helper()
	sysctl(t, srv, "net.ipv6.conf.bfs0.accept_dad=0")
	sysctl(t, cli, "net.ipv6.conf.bfc0.accept_dad=0")
	sysctl(t, cli, "net.ipv6.conf.bfc0.router_solicitations=0")
}

// sysctl sets key=value in ns through /proc/sys (no procps needed).
func sysctl(t *testing.T, ns, kv string) {
	t.Helper()
	k, v, _ := strings.Cut(kv, "=")
	path := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo "+v+" > "+path).CombinedOutput(); err != nil {
		t.Fatalf("sysctl %s in %s: %v\n%s", kv, ns, err, out)
	}
}

func waitLinkLocal(t *testing.T, ns, dev string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ip", "-n", ns, "-6", "addr", "show", "dev", dev, "scope", "link").CombinedOutput()
		if strings.Contains(string(out), "fe80::") && !strings.Contains(string(out), "tentative") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s has no usable link-local address:\n%s", dev, ns, out)
		}
	}
}

// startServer runs a Server on bfs0 in ns until the test ends, and waits
// for its log to say it listens.
func startServer(t *testing.T, ns string, logs *testutil.SyncBuffer) {
	t.Helper()
	startServerUntil(t, ns, logs, "listening for router solicitations")
}

func startServerUntil(t *testing.T, ns string, logs *testutil.SyncBuffer, logged string) {
	t.Helper()
	s, err := New(Config{Interface: "bfs0", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	nsErr := testutil.ServeInNetns(t, ns, s.Run)
	waitLog(t, logs, logged, 5*time.Second, nsErr)
}

// waitLog waits until the log holds s.
func waitLog(t *testing.T, logs *testutil.SyncBuffer, s string, d time.Duration, nsErr <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(d); !strings.Contains(logs.String(), s); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-nsErr:
			if err != nil {
				t.Fatal(err)
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server log lacks %q after %v:\n%s", s, d, logs.String())
		}
	}
}

// client is a raw ICMPv6 socket on bfc0 in the client's namespace.
type client struct {
	t    *testing.T
	conn *ipv6.PacketConn
	ifc  *net.Interface
	ll   netip.Addr
}

func newClient(t *testing.T, ns string) *client {
	t.Helper()
	c := &client{t: t}
	var err error
	testutil.InNetns(t, ns, func() {
		if c.ifc, err = net.InterfaceByName("bfc0"); err != nil {
			return
		}
		if c.ll, err = linkLocal(c.ifc); err != nil {
			return
		}
		var pc net.PacketConn
		if pc, err = net.ListenPacket("ip6:ipv6-icmp", "::"); err != nil {
			return
		}
		c.conn = ipv6.NewPacketConn(pc)
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeRouterAdvertisement)
		// No loopback: the client must not hear its own router act.
		err = errors.Join(c.conn.SetICMPFilter(&f), c.conn.SetControlMessage(ipv6.FlagHopLimit, true),
			c.conn.SetMulticastLoopback(false))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.conn.Close() })
	return c
}

// send sends m to dst from the client's link-local address with hop limit hop.
func (c *client) send(m Message, dst string, hop int) {
	c.t.Helper()
	cm := &ipv6.ControlMessage{HopLimit: hop, Src: c.ll.AsSlice(), IfIndex: c.ifc.Index}
	if _, err := c.conn.WriteTo(m.Marshal(), cm, &net.IPAddr{IP: net.ParseIP(dst), Zone: "bfc0"}); err != nil {
		c.t.Fatalf("send to %s: %v", dst, err)
	}
}

// solicit sends what iPXE sends: a solicitation with its MAC, to ff02::2.
func (c *client) solicit(hop int) {
	c.send(&RouterSolicitation{Options: []Option{SourceLinkLayerOption(c.ifc.HardwareAddr)}}, "ff02::2", hop)
}

// advertisement waits up to d for one; ok false on timeout.
func (c *client) advertisement(d time.Duration) (ra *RouterAdvertisement, hop int, src net.Addr, ok bool) {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1500)
	n, cm, src, err := c.conn.ReadFrom(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, 0, nil, false
	}
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := Parse(buf[:n])
	if err != nil {
		c.t.Fatalf("server sent %x: %v", buf[:n], err)
	}
	if cm == nil {
		c.t.Fatal("no control message: hop limit unknown")
	}
	return m.(*RouterAdvertisement), cm.HopLimit, src, true
}

func TestServerAnswersSolicitation(t *testing.T) {
	srv, cli := ndpNetns(t, true)
	var logs testutil.SyncBuffer
	startServer(t, srv, &logs)
	c := newClient(t, cli)

	// A solicitation that crossed a router (hop limit below 255) is dropped.
	c.solicit(64)
	if _, _, _, ok := c.advertisement(1500 * time.Millisecond); ok {
		t.Fatal("answered a solicitation with hop limit 64")
	}
	if !strings.Contains(logs.String(), "hop limit 64") {
		t.Errorf("no debug line for the dropped solicitation:\n%s", logs.String())
	}

	start := time.Now()
	c.solicit(HopLimit)
	ra, hop, src, ok := c.advertisement(4 * time.Second)
	if !ok {
		t.Fatalf("no advertisement within 4 s\nserver log:\n%s", logs.String())
	}
	took := time.Since(start)
	t.Logf("advertisement after %v from %v", took.Round(time.Millisecond), src)
	if hop != HopLimit {
		t.Errorf("hop limit %d, want 255", hop)
	}
	if ra.RouterLifetime != 0 || ra.Managed || ra.Other || len(ra.Options) != 1 || ra.SourceLinkLayer() == nil {
		t.Errorf("advertisement %+v: want router lifetime 0, M=O=0, only our MAC", ra)
	}
	if ip := src.(*net.IPAddr).IP; !ip.IsLinkLocalUnicast() {
		t.Errorf("source %v, want the server's link-local address", ip)
	}
	if took < 900*time.Millisecond {
		t.Errorf("answered after %v: want about 1 s, so real routers speak first", took)
	}
	// The debug line is written after the send, so the client can be first.
	waitLog(t, &logs, "answered router solicitation", 2*time.Second, nil)
	log := logs.String()
	for _, want := range []string{"no router on this link", "answered router solicitation", "mac=" + c.ifc.HardwareAddr.String(), "src=" + c.ll.String()} {
		if !strings.Contains(log, want) {
			t.Errorf("server log lacks %q:\n%s", want, log)
		}
	}
}

func TestServerSilentWithRouter(t *testing.T) {
	srv, cli := ndpNetns(t, true)
	var logs testutil.SyncBuffer
	startServer(t, srv, &logs)
	c := newClient(t, cli)

	// The client plays a real router first: a multicast advertisement
	// with a router lifetime, as radvd sends.
	c.send(&RouterAdvertisement{CurHopLimit: 64, RouterLifetime: 1800}, "ff02::1", HopLimit)
	waitLog(t, &logs, "another router advertises", 3*time.Second, nil)
	c.solicit(HopLimit)
	if ra, _, src, ok := c.advertisement(2500 * time.Millisecond); ok {
		t.Fatalf("server answered (%+v from %v) although a router advertised", ra, src)
	}
	log := logs.String()
	if !strings.Contains(log, "router="+c.ll.String()) {
		t.Errorf("silencing log line does not name the router %s:\n%s", c.ll, log)
	}
	if strings.Contains(log, "answered router solicitation") {
		t.Errorf("server log says it answered:\n%s", log)
	}
}

// TestServerWaitsForIPv6: without IPv6 on the interface the server warns
// once and keeps trying, and answers once a link-local address appears (as
// on a bridge whose first port gets carrier after bootfleet started).
func TestServerWaitsForIPv6(t *testing.T) {
	srv, cli := ndpNetns(t, false)
	var logs testutil.SyncBuffer
	s, err := New(Config{Interface: "bfs0", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	s.reopenFirst = 20 * time.Millisecond
	nsErr := testutil.ServeInNetns(t, srv, s.Run)
	testutil.Eventually(t, 5*time.Second, "three failed attempts to open the socket", func() error {
		select {
		case err := <-nsErr:
			if err != nil {
				return fmt.Errorf("entering %s: %w", srv, err)
			}
		default:
		}
		if n := strings.Count(logs.String(), "socket not open; trying again"); n < 3 {
			return fmt.Errorf("%d attempts logged:\n%s", n, logs.String())
		}
		return nil
	})
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings after three attempts, want 1:\n%s", n, logs.String())
	}
	sysctl(t, srv, "net.ipv6.conf.bfs0.disable_ipv6=0")
	waitLinkLocal(t, srv, "bfs0")
	waitLog(t, &logs, "listening for router solicitations", 10*time.Second, nil)
	c := newClient(t, cli)
	c.solicit(HopLimit)
	if _, _, _, ok := c.advertisement(4 * time.Second); !ok {
		t.Fatalf("no advertisement once IPv6 is up:\n%s", logs.String())
	}
}

// TestServerSurvivesNewInterface: the interface deleted and made again
// under the same name (a bridge rebuilt by the network configuration) has a
// new index, and a socket bound to the old one hears nothing more. The
// server must notice and reopen.
func TestServerSurvivesNewInterface(t *testing.T) {
	srv, cli := ndpNetns(t, true)
	var logs testutil.SyncBuffer
	s, err := New(Config{Interface: "bfs0", CheckEvery: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	nsErr := testutil.ServeInNetns(t, srv, s.Run)
	waitLog(t, &logs, "listening for router solicitations", 5*time.Second, nsErr)
	c := newClient(t, cli)
	c.solicit(HopLimit)
	if _, _, _, ok := c.advertisement(4 * time.Second); !ok {
		t.Fatalf("no advertisement before the interface was rebuilt:\n%s", logs.String())
	}
	testutil.IP(t, "-n", srv, "link", "del", "bfs0")
	testutil.IP(t, "-n", srv, "link", "add", "bfs0", "type", "veth", "peer", "name", "bfc0", "netns", cli)
	quietPair(t, srv, cli)
	testutil.IP(t, "-n", srv, "link", "set", "bfs0", "up")
	testutil.IP(t, "-n", cli, "link", "set", "bfc0", "up")
	waitLinkLocal(t, srv, "bfs0")
	waitLinkLocal(t, cli, "bfc0")
	c = newClient(t, cli)
	for try := 0; ; try++ {
		c.solicit(HopLimit)
		if _, _, _, ok := c.advertisement(3 * time.Second); ok {
			break
		}
		if try == 2 {
			t.Fatalf("no advertisement on the rebuilt interface:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "ipv6 ra: reopening the socket") {
		t.Errorf("server log does not say why it reopened:\n%s", logs.String())
	}
}
