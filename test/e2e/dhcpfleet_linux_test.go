package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
)

// TestDHCPFleet: three bootfleet servers in full DHCP mode on one LAN,
// sharing one PostgreSQL. A burst of clients, each DISCOVER broadcast to
// all three: every client gets exactly one offer and one ACK, the three
// servers each take a share, and every server's lease list holds every
// lease, no address twice. Then one server is killed with SIGKILL: its
// clients get no answer while it still looks live, one answer when
// their secs field says they waited, and one answer from a covering
// server once its heartbeat is stale (about 30 s).
func TestDHCPFleet(t *testing.T) {
	e := needEnv(t)
	store := startPostgres(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	names := []string{"dlb-a", "dlb-b", "dlb-c"}
	type server struct {
		name, ip string
		ns       *netns
		proc     *proc
		cli      *bootfleetCLI
	}
	var servers []*server
	for i, name := range names {
		s := &server{name: name, ip: fmt.Sprintf("10.213.0.%d", i+1), ns: lan}
		iface := bridge
		if i > 0 {
			s.ns, iface = lan.addPeer(t, s.ip+prefix), "eth0"
		}
		sdir := filepath.Join(dir, name)
		os.MkdirAll(sdir, 0o755)
		data := filepath.Join(t.TempDir(), "data")
		s.proc = startBootfleetAt(t, e, s.ns, sdir, dlbConfig, map[string]string{
			"Interface": iface, "IP": s.ip, "Data": data, "Store": store, "Name": name}, s.ip)
		s.cli = &bootfleetCLI{t: t, e: e, ns: s.ns, data: data, log: filepath.Join(sdir, "cli.log"), server: "http://" + s.ip + ":8080"}
		servers = append(servers, s)
	}
	// Each server answers only its share once it sees the two others.
	for _, s := range servers {
		ctx, cancel := contextTimeout(40 * time.Second)
		_, err := s.proc.waitLine(ctx, func(l string) (bool, error) {
			return strings.Contains(l, "dhcp lease store shared with other servers") && strings.Contains(l, "servers=3"), nil
		})
		cancel()
		if err != nil {
			t.Fatalf("%s never saw the three servers: %v\n%s", s.name, err, s.proc.out.tail(30))
		}
	}
	client := newDHCPClient(t, lan.addPeer(t, "10.213.0.250"+prefix))
	serverOf := map[string]string{} // server IP to name
	for _, s := range servers {
		serverOf[s.ip] = s.name
	}

	// A burst of 60 clients against all three.
	var macs []net.HardwareAddr
	for i := range 60 {
		macs = append(macs, net.HardwareAddr{0x52, 0x54, 0x00, 0xd1, 0xb0, byte(i)})
	}
	acked := client.dora(t, macs, 0, serverOf)
	share := map[string]int{}
	for _, a := range acked {
		share[a.server]++
	}
	if len(acked) != len(macs) || len(share) != 3 {
		t.Fatalf("%d of %d clients leased, by server %v; want all, from all three", len(acked), len(macs), share)
	}
	t.Logf("60 clients, one offer and one ACK each; by server: %v", share)
	for _, s := range servers {
		leases := checkLeases(t, s.cli)
		for mac, a := range acked {
			if leases[mac] != a.ip {
				t.Fatalf("%s lists %s's lease as %q, want %s (acked by %s)", s.name, mac, leases[mac], a.ip, a.server)
			}
		}
	}

	// dlb-c dies. Its clients are the MACs whose bucket it owns.
	victim := servers[2]
	syscall.Kill(-victim.proc.cmd.Process.Pid, syscall.SIGKILL)
	killed := time.Now()
	select {
	case <-victim.proc.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("dlb-c still running 10 s after SIGKILL")
	}
	all := dhcplb.Assign("dlb-a", []dhcplb.Member{{Name: "dlb-b", Live: true}, {Name: "dlb-c", Live: true}}, 3)
	var orphans []net.HardwareAddr
	for i := 0; len(orphans) < 12 && i < 256; i++ {
		m := net.HardwareAddr{0x52, 0x54, 0x00, 0xd1, 0xb1, byte(i)}
		if all.Decide(m, 0).Owner == "dlb-c" {
			orphans = append(orphans, m)
		}
	}
	if got := client.discover(t, orphans[:4], 0, 3*time.Second); len(got) != 0 && time.Since(killed) < 15*time.Second {
		t.Fatalf("dlb-c's clients got offers %v while dlb-c still looked live; want none until they wait or it goes stale", got)
	}
	if got := client.dora(t, orphans[4:8], 4, serverOf); len(got) != 4 {
		t.Fatalf("dlb-c's clients with secs 4: %d of 4 leased, want all by a covering server", len(got))
	}
	// Once the others see dlb-c stale, they cover its clients at once.
	for _, s := range servers[:2] {
		ctx, cancel := contextTimeout(60 * time.Second)
		_, err := s.proc.waitLine(ctx, func(l string) (bool, error) {
			_, stale, ok := strings.Cut(l, "stale_peers=")
			return strings.Contains(l, "sharing this LAN's clients") && ok && strings.Contains(stale, "dlb-c"), nil
		})
		cancel()
		if err != nil {
			t.Fatalf("%s never saw dlb-c stale: %v\n%s", s.name, err, s.proc.out.tail(30))
		}
	}
	t.Logf("dlb-c seen stale %v after SIGKILL", time.Since(killed).Round(time.Second))
	got := client.dora(t, orphans[8:], 0, serverOf)
	if len(got) != 4 {
		t.Fatalf("dlb-c's clients after it went stale: %d of 4 leased, want all", len(got))
	}
	covered := 0
	for _, s := range servers[:2] {
		lines, _ := s.proc.out.snapshotAll()
		for _, l := range lines {
			if strings.Contains(l, "level=INFO") && strings.Contains(l, "dhcp answering for a stale server") {
				covered++
			}
		}
	}
	if covered < 4 {
		t.Fatalf("%d Info lines of covering for a stale server, want one per DISCOVER of its 4 clients", covered)
	}
	leases := checkLeases(t, servers[0].cli)
	for mac, a := range got {
		if leases[mac] != a.ip {
			t.Fatalf("dlb-a lists %s's lease as %q, want %s", mac, leases[mac], a.ip)
		}
	}
}

var dlbConfig = template.Must(template.New("dlb").Parse(`# generated by test/e2e (TestDHCPFleet)
interface: {{ .Interface }}
server_ip: {{ .IP }}
data: {{ .Data }}
store: "{{ .Store }}"
server: {name: {{ .Name }}}
dhcp:
  mode: full
  range: 10.213.0.100-10.213.0.200
  lease: 1h
  reserve: -1
tftp: {listen: "off"}
nbd: {listen: "off"}
http: {listen: ":8080"}
ipxe: {dir: {{ .IPXEDir }}}
ipv6_ra: off
log: {level: debug}
`))

// dhcpClient speaks DHCP from port 68 of a namespace's eth0 for many
// MACs at once, as a lab of machines powering on, and keeps every reply.
type dhcpClient struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  map[dhcpv4.TransactionID][]*dhcpv4.DHCPv4
}

func newDHCPClient(t *testing.T, ns *netns) *dhcpClient {
	t.Helper()
	c := &dhcpClient{got: map[dhcpv4.TransactionID][]*dhcpv4.DHCPv4{}}
	err := inNetns(ns, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr == nil {
					serr = unix.BindToDevice(int(fd), "eth0")
				}
			})
			return errors.Join(err, serr)
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:68")
		if err == nil {
			c.conn = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatalf("DHCP client socket: %v", err)
	}
	t.Cleanup(func() { c.conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := c.conn.ReadFrom(buf)
			if err != nil {
				return
			}
			m, err := dhcpv4.FromBytes(buf[:n])
			if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
				continue
			}
			c.mu.Lock()
			c.got[m.TransactionID] = append(c.got[m.TransactionID], m)
			c.mu.Unlock()
		}
	}()
	return c
}

// send broadcasts msgs and returns each one's replies: once every one has
// a reply and a second more has passed (for duplicates), or at timeout.
func (c *dhcpClient) send(t *testing.T, msgs []*dhcpv4.DHCPv4, timeout time.Duration) [][]*dhcpv4.DHCPv4 {
	t.Helper()
	c.mu.Lock()
	for _, m := range msgs { // a REQUEST carries its OFFER's xid
		delete(c.got, m.TransactionID)
	}
	c.mu.Unlock()
	for _, m := range msgs {
		if _, err := c.conn.WriteTo(m.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: 67}); err != nil {
			t.Fatalf("send %v: %v", m.MessageType(), err)
		}
	}
	deadline, settled := time.Now().Add(timeout), time.Time{}
	for time.Now().Before(deadline) && (settled.IsZero() || time.Since(settled) < time.Second) {
		time.Sleep(50 * time.Millisecond)
		c.mu.Lock()
		done := !slices.ContainsFunc(msgs, func(m *dhcpv4.DHCPv4) bool { return len(c.got[m.TransactionID]) == 0 })
		c.mu.Unlock()
		if done && settled.IsZero() {
			settled = time.Now()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]*dhcpv4.DHCPv4, len(msgs))
	for i, m := range msgs {
		out[i] = c.got[m.TransactionID]
	}
	return out
}

// discover sends a DISCOVER for each MAC, with secs, and returns the
// servers that offered, by MAC.
func (c *dhcpClient) discover(t *testing.T, macs []net.HardwareAddr, secs uint16, timeout time.Duration) map[string][]string {
	t.Helper()
	var msgs []*dhcpv4.DHCPv4
	for _, mac := range macs {
		m, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true))
		if err != nil {
			t.Fatal(err)
		}
		m.NumSeconds = secs
		msgs = append(msgs, m)
	}
	out := map[string][]string{}
	for i, rs := range c.send(t, msgs, timeout) {
		for _, r := range rs {
			out[macs[i].String()] = append(out[macs[i].String()], r.ServerIdentifier().String())
		}
	}
	return out
}

// lease is what one client got: its address and the server that acked it.
type lease struct{ ip, server string }

// dora runs DISCOVER and REQUEST for each MAC with secs and returns the
// leases by MAC. It fails t unless every client got exactly one OFFER
// and exactly one ACK, from the server whose offer it took.
func (c *dhcpClient) dora(t *testing.T, macs []net.HardwareAddr, secs uint16, serverOf map[string]string) map[string]lease {
	t.Helper()
	var discovers []*dhcpv4.DHCPv4
	for _, mac := range macs {
		m, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true))
		if err != nil {
			t.Fatal(err)
		}
		m.NumSeconds = secs
		discovers = append(discovers, m)
	}
	var requests []*dhcpv4.DHCPv4
	for i, offers := range c.send(t, discovers, 15*time.Second) {
		if len(offers) != 1 || offers[0].MessageType() != dhcpv4.MessageTypeOffer {
			t.Fatalf("client %s (secs %d): %d replies %v, want exactly one OFFER", macs[i], secs, len(offers), summary(offers, serverOf))
		}
		r, err := dhcpv4.NewRequestFromOffer(offers[0], dhcpv4.WithBroadcast(true))
		if err != nil {
			t.Fatal(err)
		}
		r.NumSeconds = secs
		requests = append(requests, r)
	}
	out := map[string]lease{}
	for i, acks := range c.send(t, requests, 15*time.Second) {
		want := requests[i].ServerIdentifier().String()
		if len(acks) != 1 || acks[0].MessageType() != dhcpv4.MessageTypeAck || acks[0].ServerIdentifier().String() != want ||
			!acks[0].YourIPAddr.Equal(requests[i].RequestedIPAddress()) {
			t.Fatalf("client %s: replies %v to its REQUEST of %v from %s, want exactly one ACK of it", macs[i],
				summary(acks, serverOf), requests[i].RequestedIPAddress(), serverOf[want])
		}
		out[macs[i].String()] = lease{ip: acks[0].YourIPAddr.String(), server: serverOf[want]}
	}
	return out
}

func summary(ms []*dhcpv4.DHCPv4, serverOf map[string]string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%v %v from %s", m.MessageType(), m.YourIPAddr, serverOf[m.ServerIdentifier().String()]))
	}
	return out
}
