package dhcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// These tests run the real server on real sockets: a private network
// namespace with a veth pair, the server bound to one end, insomniacslk's
// nclient4 (a raw-socket DHCP client) on the other.

func needRoot(t *testing.T) { testutil.NeedNetns(t) }

// testNetns creates the server's namespace, with bfs0 (10.99.0.1/24), and
// the client's, with bfc0 (clientIP if set), joined by a veth pair.
func testNetns(t *testing.T, clientIP string) (srv, cli string) {
	t.Helper()
	return testutil.VethPair(t, "dhcpt", "bfs0", "bfc0", func(srv, cli string) {
		testutil.IP(t, "-n", srv, "addr", "add", "10.99.0.1/24", "dev", "bfs0")
		if clientIP != "" {
			testutil.IP(t, "-n", cli, "addr", "add", clientIP+"/24", "dev", "bfc0")
		}
	})
}

func inNetns(t *testing.T, ns string, fn func()) { testutil.InNetns(t, ns, fn) }

// startServer runs a server in ns until the test ends, and returns once
// it has bound its sockets, which it logs.
func startServer(t *testing.T, ns string, cfg Config) {
	t.Helper()
	var started syncBuffer
	h := slog.Handler(slog.NewTextHandler(&started, nil))
	if cfg.Logger != nil {
		h = slog.NewMultiHandler(cfg.Logger.Handler(), h)
	}
	cfg.Logger = slog.New(h)
	ready := make(chan error, 1)
	nsErr := testutil.ServeInNetns(t, ns, func(ctx context.Context) error {
		s, err := New(cfg)
		ready <- err
		if err != nil {
			return nil
		}
		return s.Run(ctx) // sockets are opened on this thread, inside ns
	})
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("New: %v", err)
		}
	case err := <-nsErr:
		t.Fatalf("entering %s: %v", ns, err)
	}
	testutil.Eventually(t, 5*time.Second, "the server's sockets", func() error {
		if !strings.Contains(started.String(), `msg="dhcp serving"`) {
			return fmt.Errorf("server log:\n%s", started.String())
		}
		return nil
	})
}

func TestSocketFullMode(t *testing.T) {
	needRoot(t)
	ns, cli := testNetns(t, "")
	leases := t.TempDir() + "/leases.json"
	var logs syncBuffer
	var repliesMu sync.Mutex
	var replies []string
	startServer(t, ns, Config{
		Mode: ModeFull, Interface: "bfs0", // ServerIP and Netmask come from the interface
		RangeStart: net.IPv4(10, 99, 0, 100), RangeEnd: net.IPv4(10, 99, 0, 110),
		LeaseFile: leases, Plan: pxe.PlanConfig{HTTPBase: "http://10.99.0.1:8080"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnReply: func(r Reply) {
			repliesMu.Lock()
			defer repliesMu.Unlock()
			if r.Took <= 0 || !r.Addr.Equal(net.IPv4(10, 99, 0, 100)) || r.BootFile != "ipxe.efi" || r.MAC == nil {
				t.Errorf("OnReply(%+v): want latency, 10.99.0.100, ipxe.efi and the MAC", r)
			}
			replies = append(replies, r.Request.String()+">"+r.Type.String())
		},
	})

	var c *nclient4.Client
	var err error
	inNetns(t, cli, func() { c, err = nclient4.New("bfc0", nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3)) })
	if err != nil {
		t.Fatalf("nclient4: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := c.Request(ctx,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7}))
	if err != nil {
		t.Fatalf("DORA over real sockets: %v\nserver log:\n%s", err, logs.String())
	}
	ack := lease.ACK
	if !ack.YourIPAddr.Equal(net.IPv4(10, 99, 0, 100)) || ack.BootFileName != "ipxe.efi" || !ack.ServerIPAddr.Equal(net.IPv4(10, 99, 0, 1)) {
		t.Errorf("ACK: %s", ack.Summary())
	}
	b, err := os.ReadFile(leases)
	if err != nil || !strings.Contains(string(b), "10.99.0.100") || !strings.Contains(string(b), c.InterfaceAddr().String()) {
		t.Errorf("lease file after ACK: %v\n%s", err, b)
	}
	for _, want := range []string{`msg="dhcp offer"`, `msg="dhcp ack"`, "firmware=uefi-x64", "boot_file=ipxe.efi"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("server log lacks %s:\n%s", want, logs.String())
		}
	}
	// OnReply runs after the send, so the client can hold the ACK before
	// the server's goroutine has reported it.
	testutil.Eventually(t, 2*time.Second, "OnReply of DISCOVER>OFFER REQUEST>ACK", func() error {
		repliesMu.Lock()
		defer repliesMu.Unlock()
		if got := strings.Join(replies, " "); got != "DISCOVER>OFFER REQUEST>ACK" {
			return fmt.Errorf("OnReply saw %q", got)
		}
		return nil
	})
}

func TestSocketProxyMode(t *testing.T) {
	needRoot(t)
	ns, cli := testNetns(t, "10.99.0.50")
	startServer(t, ns, Config{
		Mode: ModeProxy, Interface: "bfs0",
		Plan: pxe.PlanConfig{HTTPBase: "http://10.99.0.1:8080"},
	})
	var c *nclient4.Client
	var err error
	inNetns(t, cli, func() { c, err = nclient4.New("bfc0", nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3)) })
	if err != nil {
		t.Fatalf("nclient4: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offer, err := c.DiscoverOffer(ctx,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 0}))
	if err != nil {
		t.Fatalf("proxy DISCOVER over real sockets: %v", err)
	}
	if !offer.YourIPAddr.IsUnspecified() || offer.BootFileName != "undionly.kpxe" || offer.ClassIdentifier() != "PXEClient" {
		t.Errorf("proxy offer: %s", offer.Summary())
	}

	// Boot server discovery: a unicast REQUEST to port 4011 from the
	// client's address, answered to the port it came from.
	var conn *net.UDPConn
	inNetns(t, cli, func() {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 99, 0, 50)})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := dhcpv4.New(dhcpv4.WithHwAddr(c.InterfaceAddr()), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.IPv4(10, 99, 0, 50)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7}))
	if _, err := conn.WriteToUDP(req.ToBytes(), &net.UDPAddr{IP: net.IPv4(10, 99, 0, 1), Port: 4011}); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := conn.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no answer on 4011: %v", err)
	}
	ack, err := dhcpv4.FromBytes(buf[:n])
	if err != nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.BootFileName != "ipxe.efi" || from.Port != 4011 {
		t.Errorf("4011 reply from %v: %v %v", from, err, ack)
	}
}

// syncBuffer is shared with the other packages' tests.
type syncBuffer = testutil.SyncBuffer
