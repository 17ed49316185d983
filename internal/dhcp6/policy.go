package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bootfleet/bootfleet/internal/fqdn"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// offerHold is how long an address advertised to a Solicit stays set
// aside for the client's Request.
const offerHold = time.Minute

// enterpriseEDK2 is the enterprise number EDK II and other UEFI firmware
// put in their vendor class (343, Intel), echoed with "HTTPClient".
const enterpriseEDK2 = 343

// handle answers one decoded request from peer (its link-local source).
// A nil reply means "send nothing"; why says why, for the Debug log.
// bsPort is true for a message to BootServicePort (proxy mode only).
func (s *Server) handle(m *dhcpv6.Message, peer net.IP, bsPort bool, now time.Time) (*dhcpv6.Message, string) {
	cid := m.Options.ClientID()
	if cid == nil {
		return nil, "no client ID"
	}
	if sid := m.Options.ServerID(); sid != nil && !sid.Equal(s.duid) {
		return nil, "for another server"
	}
	key := string(cid.ToBytes())
	if ok, why := s.answers(m, []byte(key)); !ok {
		return nil, why
	}
	if s.cfg.Peers != nil {
		i, n := s.cfg.Peers.Assignment().Slot()
		s.leases.setStart(slotStart(s.cfg.RangeStart, s.cfg.RangeEnd, i, n))
	}
	mac := macOf(cid, peer)
	if mac != nil {
		s.macs.put(key, mac, now)
	} else {
		mac = s.macs.get(key, now)
	}
	c := pxe.Detect6(m)
	if s.cfg.Observe != nil && mac != nil && c.Boot() {
		s.cfg.Observe(mac, m.Type() == dhcpv6.MessageTypeSolicit, c)
	}
	if s.cfg.Proxy {
		return s.handleProxy(m, mac, c, bsPort)
	}
	if bsPort {
		return nil, "boot service port is only served in proxy mode"
	}
	var out *dhcpv6.Message
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit:
		var err error
		if out, err = s.offer(m, key, mac, now); err != nil {
			return nil, err.Error()
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		if m.Type() != dhcpv6.MessageTypeRebind && m.Options.ServerID() == nil {
			return nil, m.Type().String() + " without a server ID"
		}
		out = s.reply(m, dhcpv6.MessageTypeReply)
		a := s.addresses(out, m, key, now, s.cfg.LeaseTime)
		if err := s.grant(key, mac, a, now, now.Add(s.cfg.LeaseTime)); err != nil {
			return nil, err.Error()
		}
	case dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeInformationRequest:
		out = s.reply(m, dhcpv6.MessageTypeReply)
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		s.leases.release(key)
		s.forget(key)
		out = s.reply(m, dhcpv6.MessageTypeReply)
		out.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
		return out, ""
	default:
		return nil, "message type " + m.Type().String() + " is not served"
	}
	if mac != nil && c.Boot() && (s.cfg.Boot == nil || s.cfg.Boot(mac)) {
		s.bootOptions(out, c, mac)
	}
	s.fqdn(out, m, mac)
	return out, ""
}

// fqdn answers the client's FQDN option with its name in the inventory
// (RFC 4704 section 4.2): only when the client sent one, as a client that
// did not may not understand it. A malformed option is logged and left
// unanswered; the reply still goes out.
func (s *Server) fqdn(out, m *dhcpv6.Message, mac net.HardwareAddr) {
	opt := m.GetOneOption(dhcpv6.OptionFQDN)
	if opt == nil || mac == nil || s.cfg.HostName == nil {
		return
	}
	name := s.cfg.HostName(mac)
	if name == "" {
		return
	}
	req, err := fqdn.DecodeV6(opt.ToBytes())
	if err != nil {
		s.log.Info("dhcp6 client FQDN option not answered", "mac", mac.String(), "err", err)
		return
	}
	out.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionFQDN, OptionData: fqdn.ReplyV6(req, name)})
}

func (s *Server) reply(m *dhcpv6.Message, t dhcpv6.MessageType) *dhcpv6.Message {
	out := &dhcpv6.Message{MessageType: t, TransactionID: m.TransactionID}
	out.AddOption(dhcpv6.OptClientID(m.Options.ClientID()))
	out.AddOption(dhcpv6.OptServerID(s.duid))
	return out
}

// offer answers a Solicit: an Advertise, or with Rapid Commit a Reply
// whose lease is stored first. In a fleet (Config.Peers) the advertised
// address is stored too, held for offerHold, before it goes out: the
// shared store refuses an address another server leased since this one
// read it (its uniqueness decides between servers that pick the same
// address at once), and this server then picks another. Each refusal
// is of an address another client now holds, which the reread store
// shows, so the picks end within the range's size.
func (s *Server) offer(m *dhcpv6.Message, key string, mac net.HardwareAddr, now time.Time) (*dhcpv6.Message, error) {
	rapid := m.GetOneOption(dhcpv6.OptionRapidCommit) != nil
	tries := addrDiff(s.cfg.RangeStart, s.cfg.RangeEnd) + 1
	for try := uint64(1); ; try++ {
		hold, typ := offerHold, dhcpv6.MessageTypeAdvertise
		if rapid {
			hold, typ = s.cfg.LeaseTime, dhcpv6.MessageTypeReply
		}
		// A client that holds its address keeps its lease's end when it
		// asks again; a reservation must not shorten it.
		exp := now.Add(hold)
		if prev := s.leases.expiryOf(key); prev.After(exp) {
			exp = prev
		}
		out := s.reply(m, typ)
		a := s.addresses(out, m, key, now, hold)
		var err error
		if rapid {
			out.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionRapidCommit})
			err = s.grant(key, mac, a, now, now.Add(s.cfg.LeaseTime))
		} else if s.cfg.Peers != nil {
			err = s.grant(key, mac, a, now, exp)
		}
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, ErrTaken) || try >= tries {
			return nil, err
		}
	}
}

// grant makes the lease of a (when one was given) until exp durable
// before the message that grants it goes out. When the store fails the
// message is not sent: the client retries, and no client holds an
// address a restarted server would not know.
func (s *Server) grant(key string, mac net.HardwareAddr, a netip.Addr, now, exp time.Time) error {
	if !a.IsValid() {
		return nil
	}
	if err := s.persist(key, mac, a, exp); err != nil {
		if errors.Is(err, ErrTaken) {
			// Another server of the fleet leased it: skip the address, and
			// reread the store, whose other leases this server's view
			// lacks too, so the client's next try gets a free one.
			s.leases.takenElsewhere(key, a, now.Add(s.cfg.LeaseTime))
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			defer cancel()
			if lerr := s.load(ctx); lerr != nil {
				s.log.Warn("dhcp6 could not reread the shared leases", "err", lerr)
			}
			s.log.Info("dhcp6 address leased by another server; the client gets another when it asks again", "ip", a.String(), "err", err)
			return err
		}
		s.log.Warn("dhcp6 lease not stored, reply not sent", "err", err)
		return err
	}
	return nil
}

// addresses answers each IA_NA of m with one address of the range, held
// for d, or NoAddrsAvail when the range is full. It returns the address,
// the same for every IA_NA of a client, or none.
func (s *Server) addresses(out, m *dhcpv6.Message, key string, now time.Time, d time.Duration) netip.Addr {
	var got netip.Addr
	for _, ia := range m.Options.IANA() {
		r := &dhcpv6.OptIANA{IaId: ia.IaId, T1: d / 2, T2: d * 4 / 5}
		a, ok := s.leases.get(key, now, d)
		if ok {
			got = a
			r.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.IP(a.AsSlice()), PreferredLifetime: d, ValidLifetime: d})
		} else {
			r.T1, r.T2 = 0, 0
			r.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail,
				StatusMessage: "no free address in the range"})
			s.log.Warn("dhcp6 no address to offer", "fix", "enlarge dhcp6.range")
		}
		out.AddOption(r)
	}
	return got
}

// bootOptions adds the boot file URL (option 59) and, for UEFI HTTP
// boot, the vendor class "HTTPClient" it requires. It reports whether
// there was a boot file to add.
func (s *Server) bootOptions(out *dhcpv6.Message, c pxe.Client, mac net.HardwareAddr) bool {
	p, err := pxe.PlanFor(c, mac, s.cfg.Plan)
	if err != nil {
		s.log.Warn("dhcp6 boot client gets no boot file", "mac", mac.String(), "firmware", c.Firmware(), "reason", err)
		return false
	}
	u := p.BootFile
	if p.Proto == pxe.ProtoTFTP {
		// RFC 5970 section 3.1: tftp://[address]/path.
		u = "tftp://[" + s.cfg.ServerIP.String() + "]/" + strings.TrimLeft(p.BootFile, "/")
	}
	out.AddOption(dhcpv6.OptBootFileURL(u))
	if p.VendorClass != "" {
		out.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: enterpriseEDK2, Data: [][]byte{[]byte(p.VendorClass)}})
	}
	s.log.Info("dhcp6 boot", "mac", mac.String(), "firmware", c.Firmware(), "path", c.Path(), "boot_file", u,
		"reply", out.Type().String())
	return true
}

// macOf is the client's MAC: from a DUID-LL or DUID-LLT, else from its
// link-local source address when that is EUI-64 (RFC 4291 appendix A).
func macOf(cid dhcpv6.DUID, peer net.IP) net.HardwareAddr {
	switch d := cid.(type) {
	case *dhcpv6.DUIDLL:
		if len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	case *dhcpv6.DUIDLLT:
		if len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	}
	a, ok := netip.AddrFromSlice(peer)
	if !ok || !a.Is6() || !a.IsLinkLocalUnicast() {
		return nil
	}
	b := a.As16()
	if b[11] != 0xff || b[12] != 0xfe {
		return nil
	}
	return net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}
}

// String of a reply for logs.
func summary(m *dhcpv6.Message) string {
	return fmt.Sprintf("%s xid %s", m.Type(), m.TransactionID)
}
