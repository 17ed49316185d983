package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bootfleet/bootfleet/internal/fqdn"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// request is one decoded, validated packet and where it came from.
type request struct {
	msg    *dhcpv4.DHCPv4
	typ    dhcpv4.MessageType
	client pxe.Client
	peer   *net.UDPAddr // source address; nil in pure policy tests
	bsPort bool         // arrived on the PXE boot server port (4011)
	// unicast: sent to this server's address, not broadcast or relayed.
	unicast bool
}

// reply is what the policy decided: a packet and its destination, or nothing.
type reply struct {
	msg     *dhcpv4.DHCPv4
	dest    *net.UDPAddr
	reqType dhcpv4.MessageType // of the request answered, for OnReply
}

// validate rejects packets that are not DHCP requests from an Ethernet
// client. The reason is logged at Debug: on a shared LAN these are expected.
func validate(m *dhcpv4.DHCPv4) (dhcpv4.MessageType, error) {
	if m.OpCode != dhcpv4.OpcodeBootRequest {
		return 0, fmt.Errorf("op %v, want BootRequest (a server's reply, not for us)", m.OpCode)
	}
	if m.HWType != iana.HWTypeEthernet || len(m.ClientHWAddr) != 6 {
		return 0, fmt.Errorf("hardware type %v length %d, want Ethernet (1) length 6", m.HWType, len(m.ClientHWAddr))
	}
	if m.ClientHWAddr[0]&1 != 0 || isZero(m.ClientHWAddr) {
		return 0, fmt.Errorf("client MAC %v is multicast or zero", m.ClientHWAddr)
	}
	if m.HopCount > 16 {
		return 0, fmt.Errorf("hop count %d, want <= 16 (relay loop?)", m.HopCount)
	}
	t := m.MessageType()
	if t == dhcpv4.MessageTypeNone {
		return 0, errors.New("no DHCP message type (option 53): plain BOOTP is not served")
	}
	for _, ip := range []net.IP{m.ClientIPAddr, m.GatewayIPAddr} {
		if ip.To4() == nil {
			return 0, fmt.Errorf("address field %v is not IPv4", ip)
		}
	}
	return t, nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// handle is the policy entry point: it never touches sockets. A nil msg in
// the result means "send nothing"; why then says why, for the Debug log.
func (s *Server) handle(ctx context.Context, r request) (out reply, why string) {
	if ok, why := s.answers(r); !ok {
		return reply{}, why
	}
	var m *dhcpv4.DHCPv4
	if s.cfg.Mode == ModeProxy {
		m, why = s.handleProxy(r)
	} else {
		m, why = s.handleFull(ctx, r)
	}
	if m == nil {
		return reply{}, why
	}
	return reply{msg: m, dest: s.destination(r, m)}, ""
}

func (s *Server) handleFull(ctx context.Context, r request) (*dhcpv4.DHCPv4, string) {
	if r.bsPort {
		return nil, "boot server port is only served in proxy mode"
	}
	mac, now := r.msg.ClientHWAddr, s.now()
	switch r.typ {
	case dhcpv4.MessageTypeDiscover:
		ip, err := s.alloc.offer(mac, r.msg.RequestedIPAddress(), now)
		if errors.Is(err, errReserved) {
			// A flood makes this the common case: one line a second.
			if n, due := s.alloc.reserveLogDue(now); due {
				s.log.Warn("dhcp addresses kept for enrolled machines; DISCOVERs from others dropped",
					"dropped", n, "last", err, "fix", "enroll the machines that should boot, or enlarge dhcp.range")
			}
			return nil, err.Error()
		}
		if err != nil {
			s.log.Warn("dhcp no address to offer", "mac", mac.String(), "err", err,
				"fix", "enlarge dhcp.range or shorten dhcp.lease; check reservations")
			return nil, err.Error()
		}
		m := s.fullReply(r, dhcpv4.MessageTypeOffer, ip, s.cfg.LeaseTime)
		s.logReply("dhcp offer", r, m)
		return m, ""

	case dhcpv4.MessageTypeRequest:
		sid := r.msg.ServerIdentifier()
		if sid != nil && !sid.Equal(s.cfg.ServerIP) {
			s.alloc.forgetOffer(mac)
			return nil, fmt.Sprintf("client chose server %v", sid)
		}
		// SELECTING and INIT-REBOOT name the address in option 50;
		// RENEWING and REBINDING put it in ciaddr (RFC 2131 section 4.3.2).
		ip := r.msg.RequestedIPAddress()
		if ip == nil || ip.IsUnspecified() {
			ip = r.msg.ClientIPAddr
		}
		if ip.IsUnspecified() {
			return nil, "REQUEST names no address (no option 50, ciaddr 0)"
		}
		// An INIT-REBOOT for a free address in the range is granted although
		// RFC 2131 lets a server without a record stay silent: this server
		// owns its range, and so a machine keeps its address even if the
		// lease file was lost.
		l, err := s.alloc.commit(ctx, mac, ip, now)
		if errors.Is(err, errUnavailable) {
			s.log.Info("dhcp nak", "mac", mac.String(), "ip", ip, "reason", err)
			return s.nak(r, err.Error()), ""
		}
		if errors.Is(err, errBusy) {
			return nil, err.Error() // a retransmission of a REQUEST being committed
		}
		if err != nil {
			s.log.Error("dhcp lease not saved, not acknowledging", "mac", mac.String(), "ip", ip, "err", err,
				"fix", "check that the data directory is writable and the disk not full")
			return nil, err.Error()
		}
		m := s.fullReply(r, dhcpv4.MessageTypeAck, l.IP, s.cfg.LeaseTime)
		s.logReply("dhcp ack", r, m)
		return m, ""

	case dhcpv4.MessageTypeRelease:
		if sid := r.msg.ServerIdentifier(); sid != nil && !sid.Equal(s.cfg.ServerIP) {
			return nil, fmt.Sprintf("RELEASE for server %v", sid)
		}
		if err := s.alloc.release(ctx, mac, r.msg.ClientIPAddr, now); err != nil {
			s.log.Error("dhcp release not saved", "mac", mac.String(), "err", err)
		} else {
			s.log.Info("dhcp release", "mac", mac.String(), "ip", r.msg.ClientIPAddr)
		}
		return nil, "RELEASE needs no reply"

	case dhcpv4.MessageTypeDecline:
		if sid := r.msg.ServerIdentifier(); sid != nil && !sid.Equal(s.cfg.ServerIP) {
			return nil, fmt.Sprintf("DECLINE for server %v", sid)
		}
		ip := r.msg.RequestedIPAddress()
		if err := s.alloc.decline(ctx, mac, ip, now); err != nil {
			s.log.Error("dhcp decline not saved", "mac", mac.String(), "err", err)
		}
		s.log.Warn("dhcp decline: address answered ARP from another host", "mac", mac.String(), "ip", ip,
			"fix", "remove the static address from that host or from the DHCP range")
		return nil, "DECLINE needs no reply"

	case dhcpv4.MessageTypeInform:
		// RFC 2131 section 4.3.5: configuration only, no yiaddr, no lease time.
		m := s.fullReply(r, dhcpv4.MessageTypeAck, nil, 0)
		s.logReply("dhcp ack", r, m)
		return m, ""
	}
	return nil, fmt.Sprintf("message type %v is not served", r.typ)
}

// fullReply builds an OFFER or ACK with address configuration and, for a boot
// client that should boot, the boot options.
func (s *Server) fullReply(r request, t dhcpv4.MessageType, yiaddr net.IP, lease time.Duration) *dhcpv4.DHCPv4 {
	m := newReply(r.msg, t, s.cfg.ServerIP)
	if yiaddr != nil {
		m.YourIPAddr = yiaddr.To4()
	}
	if r.typ == dhcpv4.MessageTypeInform {
		m.ClientIPAddr = r.msg.ClientIPAddr
	}
	m.UpdateOption(dhcpv4.OptSubnetMask(s.cfg.Netmask))
	if s.cfg.Router != nil {
		m.UpdateOption(dhcpv4.OptRouter(s.cfg.Router.To4()))
	}
	if len(s.cfg.DNS) > 0 {
		m.UpdateOption(dhcpv4.OptDNS(s.cfg.DNS...))
	}
	if lease > 0 {
		m.UpdateOption(dhcpv4.OptIPAddressLeaseTime(lease))
		// T1/T2 at the RFC 2131 section 4.4.5 defaults, sent explicitly
		// because some firmware computes them wrongly when absent.
		m.UpdateOption(dhcpv4.OptRenewTimeValue(lease / 2))
		m.UpdateOption(dhcpv4.OptRebindingTimeValue(lease * 7 / 8))
	}
	s.hostName(m, r)
	if _, boot := s.cfg.Machines.Lookup(r.msg.ClientHWAddr); boot && r.client.Boot() {
		if p, ok := s.plan(r); ok {
			// No option 60 "PXEClient" in full mode: EDK II would then treat
			// the offer as BINL and ask again on port 4011. Without it, an
			// offer with a boot file is a "DHCP only" offer it boots from.
			s.bootOptions(m, p)
			if r.client.IPXE {
				m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(pxe.OptionIPXEEncap), ipxeNoProxyWait))
			}
		}
	}
	return m
}

// hostName gives a machine with a name in the inventory that name: in
// option 12 always (firmware ignores it; Linux clients set it), and in
// option 81 when the client sent one. A malformed option 81 is logged and
// left unanswered; the reply still goes out.
func (s *Server) hostName(m *dhcpv4.DHCPv4, r request) {
	if s.cfg.HostName == nil {
		return
	}
	name := s.cfg.HostName(r.msg.ClientHWAddr)
	if name == "" {
		return
	}
	m.UpdateOption(dhcpv4.OptHostName(name))
	b := r.msg.Options.Get(dhcpv4.OptionFQDN)
	if b == nil {
		return
	}
	req, err := fqdn.DecodeV4(b)
	if err != nil {
		s.log.Info("dhcp client FQDN option not answered", "mac", r.msg.ClientHWAddr.String(), "err", err)
		return
	}
	m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionFQDN, fqdn.ReplyV4(req, name)))
}

// ipxeNoProxyWait is option 175 holding sub-option 176 (no-pxedhcp) = 1.
// In full mode our offer carries both the address and the script URL, so
// there is no ProxyDHCP offer to wait for; without it iPXE waits 2-3 s for
// one at every boot. It is sent only with boot options: a machine that is
// not ours to boot may be meant for another ProxyDHCP server. Proxy mode
// never sends it: iPXE reads the flag only from the offer it takes its
// address from (a DHCPOFFER with a yiaddr from port 67), which in proxy
// mode is the site server's, so there it would do nothing.
var ipxeNoProxyWait = []byte{pxe.IPXENoPXEDHCP, 1, 1}

func (s *Server) nak(r request, msg string) *dhcpv4.DHCPv4 {
	m := newReply(r.msg, dhcpv4.MessageTypeNak, s.cfg.ServerIP)
	m.UpdateOption(dhcpv4.OptMessage(msg))
	// A relay must broadcast a NAK: the client may be on the wrong subnet.
	if !r.msg.GatewayIPAddr.IsUnspecified() {
		m.SetBroadcast()
	}
	return m
}

// newReply starts a reply the way RFC 2131 table 3 says: same xid, flags,
// chaddr and giaddr; option 82 (RFC 3046) and 61 (RFC 6842) echoed.
func newReply(req *dhcpv4.DHCPv4, t dhcpv4.MessageType, server net.IP) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero.To4(),
		YourIPAddr:    net.IPv4zero.To4(),
		ServerIPAddr:  net.IPv4zero.To4(),
		GatewayIPAddr: req.GatewayIPAddr.To4(),
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	m.UpdateOption(dhcpv4.OptMessageType(t))
	m.UpdateOption(dhcpv4.OptServerIdentifier(server))
	for _, c := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(c); v != nil {
			m.UpdateOption(dhcpv4.OptGeneric(c, v))
		}
	}
	return m
}

// plan asks package pxe what this client boots, logging why not.
func (s *Server) plan(r request) (pxe.Plan, bool) {
	p, err := pxe.PlanFor(r.client, r.msg.ClientHWAddr, s.cfg.Plan)
	if err != nil {
		s.log.Warn("dhcp boot client gets no boot file", "mac", r.msg.ClientHWAddr.String(),
			"firmware", r.client.Firmware(), "reason", err)
		return pxe.Plan{}, false
	}
	return p, true
}

// bootOptions writes the plan into the reply: siaddr, the legacy sname and
// file fields (old PXE ROMs read only those) and options 66/67.
func (s *Server) bootOptions(m *dhcpv4.DHCPv4, p pxe.Plan) {
	m.ServerIPAddr = s.cfg.ServerIP
	m.ServerHostName = s.cfg.ServerIP.String()
	m.UpdateOption(dhcpv4.OptTFTPServerName(s.cfg.ServerIP.String()))
	if len(p.BootFile) < 128 { // the file field holds 127 bytes and a NUL
		m.BootFileName = p.BootFile
	}
	m.UpdateOption(dhcpv4.OptBootFileName(p.BootFile))
	if p.VendorClass != "" {
		m.UpdateOption(dhcpv4.OptClassIdentifier(p.VendorClass))
	}
}

// destination picks where a reply goes (RFC 2131 section 4.1):
// via the relay if there is one; to ciaddr when the client has an address;
// otherwise broadcast, since without a raw socket the server cannot send to
// a yiaddr the client does not answer ARP for yet.
func (s *Server) destination(r request, m *dhcpv4.DHCPv4) *net.UDPAddr {
	clientPort := s.cfg.Port + 1
	switch {
	case !r.msg.GatewayIPAddr.IsUnspecified():
		return &net.UDPAddr{IP: r.msg.GatewayIPAddr, Port: s.cfg.Port}
	case r.bsPort && r.peer != nil && !r.peer.IP.IsUnspecified():
		// PXE boot server discovery: answer the port the client sent from.
		return r.peer
	case m.MessageType() == dhcpv4.MessageTypeNak:
		return &net.UDPAddr{IP: net.IPv4bcast, Port: clientPort}
	case !r.msg.ClientIPAddr.IsUnspecified() && !r.msg.IsBroadcast():
		return &net.UDPAddr{IP: r.msg.ClientIPAddr, Port: clientPort}
	default:
		return &net.UDPAddr{IP: net.IPv4bcast, Port: clientPort}
	}
}

func (s *Server) logReply(msg string, r request, m *dhcpv4.DHCPv4) {
	attrs := []any{slog.String("mac", r.msg.ClientHWAddr.String()),
		slog.String("ip", m.YourIPAddr.String()),
		slog.String("firmware", r.client.Firmware()),
		slog.String("boot_file", bootFile(m))}
	if vc := m.Options.Get(dhcpv4.OptionClassIdentifier); vc != nil {
		attrs = append(attrs, slog.String("vendor_class", string(vc)))
	}
	s.log.Info(msg, append(attrs, slog.String("mode", s.cfg.Mode.String()))...)
}

// bootFile is what the reply tells the client to boot: option 67, which
// bootOptions always sets, else the legacy file field, which cannot hold
// a URL of 128 bytes or more.
func bootFile(m *dhcpv4.DHCPv4) string {
	if f := m.Options.Get(dhcpv4.OptionBootfileName); len(f) > 0 {
		return string(f)
	}
	return m.BootFileName
}
