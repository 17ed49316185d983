package dhcp6

import (
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
)

// Peers is the other bootfleet servers answering DHCPv6 on this LAN from
// the same lease store; membership.DHCPPeers implements it, with a scope
// of its own for DHCPv6.
type Peers interface {
	Assignment() *dhcplb.Assignment
}

// ErrTaken is what LeaseStore.Put wraps when another client holds the
// address: another server of the fleet leased it. The server then skips
// the address and the client, asking again, gets another one.
var ErrTaken = errors.New("dhcp6: the address is leased to another client")

// balanced reports whether every server on the link hears m and load
// balancing picks the one that answers: messages with no server ID, sent
// to All_DHCP_Relay_Agents_and_Servers (Solicit, Rebind, Confirm,
// Information-Request). Request, Renew, Release and Decline name the
// server the client chose; handle drops those for another server.
func balanced(m *dhcpv6.Message) bool {
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeInformationRequest:
		return m.Options.ServerID() == nil
	}
	return false
}

// answers is RFC 3074 load balancing over the client's DUID, as package
// dhcp does over the MAC: the DUID's bucket owner answers; a live server
// covers a stale owner's bucket, or a client whose Elapsed Time (RFC 8415
// section 21.9, which plays DHCPv4's secs) passed the fleet's threshold.
// why says why not, for the Debug line of the dropped message.
func (s *Server) answers(m *dhcpv6.Message, duid []byte) (bool, string) {
	if s.cfg.Peers == nil || !balanced(m) {
		return true, ""
	}
	secs := uint16(min(m.Options.ElapsedTime().Seconds(), math.MaxUint16))
	d := s.cfg.Peers.Assignment().Decide(duid, secs)
	switch d.Reason {
	case dhcplb.Alone, dhcplb.Own:
	case dhcplb.CoverStale:
		s.log.Info("dhcp6 answering for a stale server", "duid", fmt.Sprintf("%x", duid), "bucket", d.Bucket, "owner", d.Owner)
	case dhcplb.CoverWaited:
		s.log.Info("dhcp6 answering a client that waited for its server", "duid", fmt.Sprintf("%x", duid), "bucket", d.Bucket,
			"owner", d.Owner, "secs", secs)
	default:
		return false, fmt.Sprintf("DUID %x's bucket %d is server %s's (RFC 3074 load balancing over the DUID, elapsed %ds)", duid, d.Bucket, d.Owner, secs)
	}
	return true, ""
}

// slotStart is where this server starts its search for a free address:
// its slot's share of the range, so servers sharing the range rarely
// offer the same address (a commit of one another leased fails with
// ErrTaken anyway). Ranges longer than 2^32 are shared as if 2^32 long.
func slotStart(first, last netip.Addr, slot, slots int) netip.Addr {
	if slots <= 1 || slot <= 0 {
		return first
	}
	span := addrDiff(first, last) + 1
	return addrAdd(first, span/uint64(slots)*uint64(slot))
}

// addrDiff is last-first, capped at 2^32-1.
func addrDiff(first, last netip.Addr) uint64 {
	f, l := first.As16(), last.As16()
	for i := 0; i < 12; i++ {
		if f[i] != l[i] {
			return math.MaxUint32
		}
	}
	lo := func(b [16]byte) uint64 {
		return uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	}
	if lo(l) < lo(f) {
		return 0
	}
	return lo(l) - lo(f)
}

// addrAdd is a+n, n below 2^32.
func addrAdd(a netip.Addr, n uint64) netip.Addr {
	b := a.As16()
	carry := n
	for i := 15; i >= 0 && carry > 0; i-- {
		v := uint64(b[i]) + carry&0xff
		b[i] = byte(v)
		carry = carry>>8 + v>>8
	}
	return netip.AddrFrom16(b)
}
