package dhcp

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

var (
	serverIP = net.IPv4(10, 0, 0, 1).To4()
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	macA     = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 0xa}
	macB     = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 0xb}
	macC     = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 0xc}
	macD     = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 0xd}
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type testServer struct {
	*Server
	clock *clock
	store LeaseStore
}

// newTestServer builds a server on a fake interface with a three-address
// pool (10.0.0.100-102); mod adjusts the config.
func newTestServer(t *testing.T, mode Mode, mod ...func(*Config)) *testServer {
	t.Helper()
	store := NewMemStore()
	cfg := Config{
		Mode:       mode,
		Interface:  "test0",
		ServerIP:   serverIP,
		Netmask:    net.CIDRMask(24, 32),
		RangeStart: net.IPv4(10, 0, 0, 100),
		RangeEnd:   net.IPv4(10, 0, 0, 102),
		LeaseTime:  time.Hour,
		Router:     net.IPv4(10, 0, 0, 254),
		DNS:        []net.IP{net.IPv4(10, 0, 0, 53)},
		LeaseStore: store,
		Plan:       pxe.PlanConfig{HTTPBase: "http://10.0.0.1:8080"},
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := &clock{t: t0}
	s.now = c.now
	return &testServer{Server: s, clock: c, store: cfg.LeaseStore}
}

// send runs one request through decode, validation and policy.
func (ts *testServer) send(t *testing.T, m *dhcpv4.DHCPv4, bs bool) (reply, string) {
	t.Helper()
	peer := &net.UDPAddr{IP: net.IPv4zero, Port: 68}
	if !m.ClientIPAddr.IsUnspecified() {
		peer.IP = m.ClientIPAddr
	}
	return ts.process(context.Background(), m.ToBytes(), peer, bs)
}

// Firmware flavours as seen in the captures.
var (
	fwOVMF   = []dhcpv4.Modifier{vendorClass("PXEClient:Arch:00007:UNDI:003000"), archOpt(7)}
	fwBIOS   = []dhcpv4.Modifier{vendorClass("PXEClient:Arch:00000:UNDI:002001"), archOpt(0)}
	fwIPXE   = []dhcpv4.Modifier{vendorClass("PXEClient:Arch:00007:UNDI:003010"), archOpt(7), dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))}
	fwHTTP   = []dhcpv4.Modifier{vendorClass("HTTPClient:Arch:00016:UNDI:003000"), archOpt(16)}
	fwLinux  = []dhcpv4.Modifier{vendorClass("udhcp 1.36.1")}
	fwNone   []dhcpv4.Modifier
	withUUID = dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, make([]byte, 16)...))
)

func vendorClass(s string) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptClassIdentifier(s)) }
func archOpt(a uint16) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptClientArch(iana.Arch(a)))
}

func discover(t *testing.T, mac net.HardwareAddr, fw []dhcpv4.Modifier, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.NewDiscovery(mac, append(append([]dhcpv4.Modifier{}, fw...), mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msg(t *testing.T, typ dhcpv4.MessageType, mac net.HardwareAddr, fw []dhcpv4.Modifier, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m := discover(t, mac, fw, mods...)
	m.UpdateOption(dhcpv4.OptMessageType(typ))
	return m
}

func requested(ip net.IP) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip)) }
func serverID(ip net.IP) dhcpv4.Modifier  { return dhcpv4.WithOption(dhcpv4.OptServerIdentifier(ip)) }
func ip4(s string) net.IP                 { return net.ParseIP(s).To4() }

// dora runs DISCOVER then REQUEST (SELECTING) and returns the acked address.
func (ts *testServer) dora(t *testing.T, mac net.HardwareAddr, fw []dhcpv4.Modifier) net.IP {
	t.Helper()
	off, why := ts.send(t, discover(t, mac, fw), false)
	if off.msg == nil {
		t.Fatalf("no offer for %v: %s", mac, why)
	}
	ack, why := ts.send(t, msg(t, dhcpv4.MessageTypeRequest, mac, fw, requested(off.msg.YourIPAddr), serverID(serverIP)), false)
	if ack.msg == nil || ack.msg.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("no ack for %v: %v %s", mac, ack.msg, why)
	}
	return ack.msg.YourIPAddr
}

type staticObserver struct{ n int }

func (o *staticObserver) DHCPPacket(net.HardwareAddr, dhcpv4.MessageType, pxe.Client) { o.n++ }

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }
