package dhcp6

import (
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

func newProxy(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Interface: "br0", ServerIP: serverIP, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Proxy: true,
		Plan: pxe.PlanConfig{HTTPBase: "http://[fd00:213::1]:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return t0 }
	return s
}

// edk2 is a message as EDK II's PXEv6 client sends it: a DUID-UUID (no
// MAC in it), an IA_NA, its vendor class and architecture.
func edk2(t *testing.T, typ dhcpv6.MessageType, mods ...dhcpv6.Modifier) []byte {
	t.Helper()
	m := &dhcpv6.Message{MessageType: typ, TransactionID: dhcpv6.TransactionID{4, 5, 6}}
	m.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDUUID{UUID: [16]byte{1, 2, 3}}))
	m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 7}})
	for _, mod := range append(pxe6(), mods...) {
		mod(m)
	}
	return m.ToBytes()
}

// TestProxyPXEv6 walks EDK II's proxy exchange: an Advertise with no
// IA_NA, vendor class PXEClient (enterprise 343) and the boot file URL;
// then, from the address the other server gave, a Request to port 4011
// answered with a Reply carrying the boot file again.
func TestProxyPXEv6(t *testing.T) {
	s := newProxy(t)
	adv, why := s.process(edk2(t, dhcpv6.MessageTypeSolicit), peerA)
	if adv == nil || adv.Type() != dhcpv6.MessageTypeAdvertise {
		t.Fatalf("SOLICIT from PXEv6: %v (%s), want an ADVERTISE", adv, why)
	}
	noAddress(t, adv)
	if got := adv.Options.BootFileURL(); got != "tftp://[fd00:213::1]/ipxe.efi" {
		t.Errorf("ADVERTISE boot file URL %q, want tftp://[fd00:213::1]/ipxe.efi", got)
	}
	vcs := adv.Options.VendorClasses()
	if len(vcs) != 1 || vcs[0].EnterpriseNumber != 343 || string(vcs[0].Data[0]) != "PXEClient" {
		t.Errorf("ADVERTISE vendor classes %v, want one of enterprise 343 saying PXEClient (EDK II's proxy BINL offer)", vcs)
	}
	// The Request to 547 belongs to the address server; the one to 4011,
	// from the global address (not EUI-64), is ours.
	sid := dhcpv6.WithServerID(adv.Options.ServerID())
	if out, _ := s.process(edk2(t, dhcpv6.MessageTypeRequest, sid), peerA); out != nil {
		t.Errorf("REQUEST to port 547 was answered: %s", out.Summary())
	}
	rep, why := s.processOn(edk2(t, dhcpv6.MessageTypeRequest, sid), net.ParseIP("fd00:213::1a"), true)
	if rep == nil || rep.Type() != dhcpv6.MessageTypeReply {
		t.Fatalf("REQUEST to port 4011: %v (%s), want a REPLY", rep, why)
	}
	noAddress(t, rep)
	if got := rep.Options.BootFileURL(); got != "tftp://[fd00:213::1]/ipxe.efi" {
		t.Errorf("REPLY boot file URL %q, want tftp://[fd00:213::1]/ipxe.efi", got)
	}
	other := dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: macB})
	if out, _ := s.processOn(edk2(t, dhcpv6.MessageTypeRequest, other), net.ParseIP("fd00:213::1a"), true); out != nil {
		t.Errorf("REQUEST to port 4011 for another server was answered: %s", out.Summary())
	}
}

// TestProxyNeverAddresses: whatever a client sends, to either port, a
// proxy reply never carries an IA_NA; an OS gets nothing at all.
func TestProxyNeverAddresses(t *testing.T) {
	s := newProxy(t)
	types := []dhcpv6.MessageType{dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew,
		dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline,
		dhcpv6.MessageTypeInformationRequest}
	sid := dhcpv6.WithServerID(s.duid)
	for _, fw := range [][]dhcpv6.Modifier{pxe6(), http6(), ipxe6(), nil} {
		for _, typ := range types {
			for _, bs := range []bool{false, true} {
				b := msg(t, typ, macA, append([]dhcpv6.Modifier{sid, dhcpv6.WithRapidCommit}, fw...)...)
				out, _ := s.processOn(b, peerA, bs)
				if out == nil {
					continue
				}
				if fw == nil {
					t.Errorf("%s from an OS (port 4011: %v) was answered: %s", typ, bs, out.Summary())
				}
				noAddress(t, out)
			}
		}
	}
	if out, _ := s.process(msg(t, dhcpv6.MessageTypeInformationRequest, macA, ipxe6()...), peerA); out == nil ||
		out.Options.BootFileURL() != "http://[fd00:213::1]:8080/ipxe/52-54-00-00-00-0a" {
		t.Errorf("INFORMATION-REQUEST from iPXE: %v, want a REPLY with its script URL", out)
	}
}

func noAddress(t *testing.T, m *dhcpv6.Message) {
	t.Helper()
	if len(m.Options.IANA()) != 0 || m.GetOneOption(dhcpv6.OptionIATA) != nil {
		t.Errorf("proxy reply %s carries an IA: a proxy must never hand out an address", m.Summary())
	}
}
