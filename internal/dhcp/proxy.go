package dhcp

import (
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// PXE vendor options carried in option 43 when option 60 is "PXEClient"
// (PXE 2.1 section 2.2.7, table 2-1).
const (
	pxeDiscoveryControl = 6
	// Bit 3: a boot file name is in this packet; download it without boot
	// server discovery or a menu. EDK II classifies an offer that carries
	// this tag as a "PXE10" offer and boots the file straight from the
	// proxy offer; without the tag the offer is "BINL" and the firmware
	// first repeats its request to port 4011 (which we also answer).
	pxeNoDiscovery = 1 << 3
)

// pxeVendorOptions is option 43 for proxy replies to PXE clients.
var pxeVendorOptions = []byte{pxeDiscoveryControl, 1, pxeNoDiscovery, 0xff}

// handleProxy implements proxyDHCP (PXE 2.1 section 2.2.3): answer only boot
// clients, never with an address. On port 67 the site's DHCP server answers
// too; the firmware merges its address with our boot file. On 4011 the client
// already has an address and asks us alone.
func (s *Server) handleProxy(r request) (*dhcpv4.DHCPv4, string) {
	if !r.client.Boot() {
		return nil, "not a boot client (no PXEClient/HTTPClient vendor class, not iPXE)"
	}
	if _, boot := s.cfg.Machines.Lookup(r.msg.ClientHWAddr); !boot {
		return nil, "machine is configured not to boot"
	}
	var t dhcpv4.MessageType
	switch {
	case r.typ == dhcpv4.MessageTypeDiscover && !r.bsPort:
		t = dhcpv4.MessageTypeOffer
	case r.typ == dhcpv4.MessageTypeRequest && r.bsPort,
		r.typ == dhcpv4.MessageTypeInform && r.bsPort:
		t = dhcpv4.MessageTypeAck
	case r.typ == dhcpv4.MessageTypeRequest:
		// A REQUEST on 67 selects the site server's offer (or ours, which
		// carries no address, so nothing to acknowledge).
		return nil, "REQUEST on port 67 is for the site's DHCP server"
	default:
		return nil, "message type " + r.typ.String() + " is not served in proxy mode"
	}
	p, ok := s.plan(r)
	if !ok {
		return nil, "no boot plan"
	}
	m := newReply(r.msg, t, s.cfg.ServerIP)
	if r.bsPort {
		m.ClientIPAddr = r.msg.ClientIPAddr.To4()
	}
	vc := p.VendorClass
	if vc == "" {
		// Both EDK II and iPXE recognise a proxy offer by this option.
		vc = pxe.VendorPXE
	}
	m.UpdateOption(dhcpv4.OptClassIdentifier(vc))
	if vc == pxe.VendorPXE {
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, pxeVendorOptions))
	}
	// PXE 2.1 asks servers to echo the client's UUID (option 97).
	if v := r.msg.Options.Get(dhcpv4.OptionClientMachineIdentifier); v != nil {
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, v))
	}
	s.bootOptions(m, p)
	if t == dhcpv4.MessageTypeOffer {
		s.logReply("dhcp offer", r, m)
	} else {
		s.logReply("dhcp ack", r, m)
	}
	return m, ""
}

// bsPort returns the PXE boot server discovery port for a DHCP server port:
// 4011 for 67, and the same offset for test ports.
func bsPort(dhcpPort int) int { return dhcpPort + 4011 - 67 }
