package dhcp6

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

var (
	macA, _  = net.ParseMAC("52:54:00:00:00:0a")
	macB, _  = net.ParseMAC("52:54:00:00:00:0b")
	serverIP = net.ParseIP("fd00:213::1")
	peerA    = net.ParseIP("fe80::5054:ff:fe00:a")
	t0       = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
)

func newTestServer(t *testing.T, last string) *Server {
	t.Helper()
	s, err := New(Config{Interface: "br0", ServerIP: serverIP, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		RangeStart: netip.MustParseAddr("fd00:213::100"), RangeEnd: netip.MustParseAddr(last),
		Plan: pxe.PlanConfig{HTTPBase: "http://[fd00:213::1]:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return t0 }
	return s
}

// firmware options as EDK II (PXE and HTTP boot) and iPXE send them.
func pxe6() []dhcpv6.Modifier {
	return []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64),
		dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("PXEClient:Arch:00007:UNDI:003000")}})}
}

func http6() []dhcpv6.Modifier {
	return []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64_HTTP),
		dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("HTTPClient:Arch:00016:UNDI:003000")}})}
}

func ipxe6() []dhcpv6.Modifier {
	return []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64), dhcpv6.WithUserClass([]byte("iPXE"))}
}

func msg(t *testing.T, typ dhcpv6.MessageType, mac net.HardwareAddr, mods ...dhcpv6.Modifier) []byte {
	t.Helper()
	m := &dhcpv6.Message{MessageType: typ, TransactionID: dhcpv6.TransactionID{1, 2, 3}}
	m.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLLT{HWType: iana.HWTypeEthernet, Time: 1, LinkLayerAddr: mac}))
	m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 7}})
	for _, mod := range mods {
		mod(m)
	}
	return m.ToBytes()
}

func addrOf(t *testing.T, m *dhcpv6.Message) string {
	t.Helper()
	ia := m.Options.OneIANA()
	if ia == nil || ia.IaId != [4]byte{0, 0, 0, 7} {
		t.Fatalf("reply %s: want the IA_NA with the client's IAID", m.Summary())
	}
	if a := ia.Options.OneAddress(); a != nil {
		return a.IPv6Addr.String()
	}
	return ""
}

func TestBootOptions(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fw     []dhcpv6.Modifier
		url    string
		vendor string
	}{
		{"pxe v6 gets ipxe.efi over tftp", pxe6(), "tftp://[fd00:213::1]/ipxe.efi", ""},
		{"http boot v6 gets an http url and HTTPClient", http6(), "http://[fd00:213::1]:8080/files/ipxe.efi", "HTTPClient"},
		{"ipxe gets its script", ipxe6(), "http://[fd00:213::1]:8080/ipxe/52-54-00-00-00-0a", ""},
		{"an os gets an address only", nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, "fd00:213::1ff")
			out, why := s.process(msg(t, dhcpv6.MessageTypeSolicit, macA, tt.fw...), peerA)
			if out == nil {
				t.Fatalf("no reply: %s", why)
			}
			if out.Type() != dhcpv6.MessageTypeAdvertise || addrOf(t, out) != "fd00:213::100" {
				t.Errorf("reply %s, want an ADVERTISE of fd00:213::100", out.Summary())
			}
			if got := out.Options.BootFileURL(); got != tt.url {
				t.Errorf("boot file URL %q, want %q", got, tt.url)
			}
			var vendor string
			for _, vc := range out.Options.VendorClasses() {
				vendor = string(vc.Data[0])
			}
			if vendor != tt.vendor {
				t.Errorf("vendor class %q, want %q", vendor, tt.vendor)
			}
		})
	}
}

func TestLeaseLifecycle(t *testing.T) {
	s := newTestServer(t, "fd00:213::101")
	adv, _ := s.process(msg(t, dhcpv6.MessageTypeSolicit, macA, pxe6()...), peerA)
	sid := dhcpv6.WithServerID(adv.Options.ServerID())
	rep, why := s.process(msg(t, dhcpv6.MessageTypeRequest, macA, append(pxe6(), sid)...), peerA)
	if rep == nil || rep.Type() != dhcpv6.MessageTypeReply || addrOf(t, rep) != "fd00:213::100" {
		t.Fatalf("REQUEST: %v %s, want a REPLY keeping fd00:213::100", rep, why)
	}
	if ia := rep.Options.OneIANA(); ia.T1 != 30*time.Minute || ia.Options.OneAddress().ValidLifetime != time.Hour {
		t.Errorf("IA_NA %s: want T1 30m and a valid lifetime of 1h", ia)
	}
	other := dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: macB})
	if out, _ := s.process(msg(t, dhcpv6.MessageTypeRequest, macA, other), peerA); out != nil {
		t.Errorf("a REQUEST to another server was answered: %s", out.Summary())
	}
	if out, _ := s.process(msg(t, dhcpv6.MessageTypeRequest, macA), peerA); out != nil {
		t.Errorf("a REQUEST without a server ID was answered: %s", out.Summary())
	}
	// Two clients fill the range of two; the third gets NoAddrsAvail.
	b, _ := s.process(msg(t, dhcpv6.MessageTypeSolicit, macB), nil)
	if addrOf(t, b) != "fd00:213::101" {
		t.Fatalf("second client got %s, want fd00:213::101", addrOf(t, b))
	}
	macC, _ := net.ParseMAC("52:54:00:00:00:0c")
	c, _ := s.process(msg(t, dhcpv6.MessageTypeSolicit, macC), nil)
	if st := c.Options.OneIANA().Options.Status(); addrOf(t, c) != "" || st == nil || st.StatusCode != iana.StatusNoAddrsAvail {
		t.Errorf("third client in a full range: %s, want NoAddrsAvail", c.Summary())
	}
	// A release frees the address for the next client.
	if out, _ := s.process(msg(t, dhcpv6.MessageTypeRelease, macA, sid), peerA); out == nil || out.Type() != dhcpv6.MessageTypeReply {
		t.Fatalf("RELEASE: %v, want a REPLY", out)
	}
	if c, _ := s.process(msg(t, dhcpv6.MessageTypeSolicit, macC), nil); addrOf(t, c) != "fd00:213::100" {
		t.Errorf("after the release the third client got %q, want fd00:213::100", addrOf(t, c))
	}
}

func TestRapidCommit(t *testing.T) {
	s := newTestServer(t, "fd00:213::1ff")
	out, _ := s.process(msg(t, dhcpv6.MessageTypeSolicit, macA, dhcpv6.WithRapidCommit), peerA)
	if out == nil || out.Type() != dhcpv6.MessageTypeReply || out.GetOneOption(dhcpv6.OptionRapidCommit) == nil {
		t.Fatalf("rapid-commit SOLICIT: %v, want a REPLY with rapid commit", out)
	}
}

func TestMACOf(t *testing.T) {
	uuid := &dhcpv6.DUIDUUID{}
	if got := macOf(uuid, peerA); got.String() != macA.String() {
		t.Errorf("MAC from EUI-64 link-local %v = %v, want %v", peerA, got, macA)
	}
	if got := macOf(uuid, net.ParseIP("fe80::1234")); got != nil {
		t.Errorf("MAC from a link-local that is not EUI-64 = %v, want none", got)
	}
	if got := macOf(&dhcpv6.DUIDLL{LinkLayerAddr: macB}, peerA); got.String() != macB.String() {
		t.Errorf("MAC from DUID-LL = %v, want %v", got, macB)
	}
}

func TestConfigErrors(t *testing.T) {
	base := Config{Interface: "br0", ServerIP: serverIP, MAC: macA,
		RangeStart: netip.MustParseAddr("fd00::100"), RangeEnd: netip.MustParseAddr("fd00::1ff")}
	for _, tt := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"v4 server", func(c *Config) { c.ServerIP = net.IPv4(10, 0, 0, 1) }, "not a global or unique-local IPv6"},
		{"link-local server", func(c *Config) { c.ServerIP = peerA }, "not a global or unique-local IPv6"},
		{"reversed range", func(c *Config) { c.RangeStart, c.RangeEnd = c.RangeEnd, c.RangeStart }, "first is after last"},
		{"huge range", func(c *Config) { c.RangeEnd = netip.MustParseAddr("fd00::1:ffff") }, "at most 65536"},
		{"short lease", func(c *Config) { c.LeaseTime = time.Second }, "shorter than"},
	} {
		c := base
		tt.mod(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestObserve: boot firmware is reported, with Solicit told apart; a
// client with no vendor or user class (EDK II's own IPv6 stack, or an
// OS) is not.
func TestObserve(t *testing.T) {
	s := newTestServer(t, "fd00:213::1ff")
	var got []string
	s.cfg.Observe = func(mac net.HardwareAddr, solicit bool, c pxe.Client) {
		got = append(got, fmt.Sprintln(mac, solicit, c.Path()))
	}
	s.process(msg(t, dhcpv6.MessageTypeSolicit, macA, pxe6()...), peerA)
	s.process(msg(t, dhcpv6.MessageTypeInformationRequest, macA), peerA)
	s.process(msg(t, dhcpv6.MessageTypeSolicit, macA, ipxe6()...), peerA)
	if want := "52:54:00:00:00:0a true PXEv6\n52:54:00:00:00:0a true iPXE\n"; strings.Join(got, "") != want {
		t.Errorf("observed %v, want %s", got, want)
	}
}
