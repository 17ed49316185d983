package dhcp

import (
	"context"
	"fmt"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
)

// Peers tells a server about the other servers answering DHCP on its LAN
// from the same lease store; membership.DHCPPeers is one, wired in by
// internal/app. Assignment is called for every packet and must read memory.
type Peers interface {
	Assignment() *dhcplb.Assignment
}

// leaseRefresh is how often a server sharing its lease store rereads it,
// so that it stops offering addresses the others leased. A refused
// commit rereads it sooner, but never more than once per refreshGap.
const (
	leaseRefresh = 10 * time.Second
	refreshGap   = time.Second
)

// balanced reports whether every server on the LAN hears r and load
// balancing picks the one that answers (RFC 3074): a DISCOVER,
// a REQUEST naming no server (INIT-REBOOT, or REBINDING when broadcast),
// a broadcast INFORM. A REQUEST naming a server (SELECTING), a RELEASE or
// DECLINE is for the server named; a RENEW or INFORM sent to this
// server's address, or a request on the boot server port, is answered by
// the server the client chose to talk to.
func balanced(r request) bool {
	if r.bsPort {
		return false
	}
	switch r.typ {
	case dhcpv4.MessageTypeDiscover:
		return true
	case dhcpv4.MessageTypeRequest:
		return r.msg.ServerIdentifier() == nil && !r.unicast
	case dhcpv4.MessageTypeInform:
		return !r.unicast
	}
	return false
}

// answers applies load balancing to r: whether this server answers it,
// and if not why, for the Debug line of the dropped packet.
func (s *Server) answers(r request) (bool, string) {
	if s.cfg.Peers == nil || !balanced(r) {
		return true, ""
	}
	mac, secs := r.msg.ClientHWAddr, r.msg.NumSeconds
	d := s.cfg.Peers.Assignment().Decide(mac, secs)
	switch d.Reason {
	case dhcplb.Alone:
	case dhcplb.Own:
		s.log.Debug("dhcp answering: the client's bucket is this server's", "mac", mac.String(), "type", r.typ.String(), "bucket", d.Bucket)
	case dhcplb.CoverStale:
		s.log.Info("dhcp answering for a stale server", "mac", mac.String(), "type", r.typ.String(), "bucket", d.Bucket, "owner", d.Owner)
	case dhcplb.CoverWaited:
		s.log.Info("dhcp answering a client that waited for its server", "mac", mac.String(), "type", r.typ.String(),
			"bucket", d.Bucket, "owner", d.Owner, "secs", secs)
	default:
		return false, fmt.Sprintf("client %v's bucket %d is server %s's (RFC 3074 load balancing, secs %d)", mac, d.Bucket, d.Owner, secs)
	}
	return true, ""
}

// observes reports whether this server records r (discovered machine,
// boot telemetry). A packet another server of the LAN answers is that
// server's to record, or every server would count the boot and write the
// machine again; a REQUEST naming another server goes to the one whose
// bucket holds the client, which is the server that saw its DISCOVER.
func (s *Server) observes(r request) bool {
	if s.cfg.Peers == nil {
		return true
	}
	sid := r.msg.ServerIdentifier()
	named := r.typ == dhcpv4.MessageTypeRequest && sid != nil && !sid.Equal(s.cfg.ServerIP)
	if !balanced(r) && !named {
		return true
	}
	return s.cfg.Peers.Assignment().Decide(r.msg.ClientHWAddr, r.msg.NumSeconds).Answer
}

// runShared keeps the allocator in step with the fleet until ctx is
// done: its slot in the range, and rereads of the leases the other
// servers write.
func (s *Server) runShared(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var (
		shared      bool
		slot, slots = 0, 1
		reread      time.Time // last reread, successful or not
		failing     bool
	)
	for {
		f := s.cfg.Peers.Assignment()
		i, n := f.Slot()
		if !f.Alone() != shared || i != slot || n != slots {
			shared, slot, slots = !f.Alone(), i, n
			s.alloc.setShared(shared, slot, slots)
			s.log.Info("dhcp lease store shared with other servers", "shared", shared, "slot", slot, "servers", slots)
			reread = time.Time{}
		}
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.alloc.kick:
			kicked = true
		}
		now := time.Now()
		if !shared || now.Sub(reread) < refreshGap || (!kicked && now.Sub(reread) < leaseRefresh) {
			continue
		}
		reread = now
		changed, err := s.alloc.refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			s.log.Warn("dhcp rereading the shared leases failed; offering from the last picture, commits still checked by the store", "err", err)
		case err == nil:
			if failing {
				s.log.Info("dhcp rereading the shared leases works again")
			}
			failing = false
			if changed > 0 {
				s.log.Debug("dhcp reread the shared leases", "changed", changed, "kicked", kicked)
			}
		}
	}
}
