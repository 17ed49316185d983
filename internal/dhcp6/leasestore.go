package dhcp6

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Lease is one client's address: IP belongs to the client with DUID until
// Expiry. MAC is the machine's, when the server could tell (see macOf).
type Lease struct {
	DUID   []byte
	MAC    net.HardwareAddr
	IP     netip.Addr
	Expiry time.Time
}

// LeaseStore persists leases. The server calls Put before it sends the
// Reply that grants a lease, so a lease a client holds is always stored,
// and a restarted server gives a returning client its address again and
// never gives that address to another. A serving bootfleet keeps them in
// the inventory (inventorysvc.Leases6).
//
// There is no group commit as in package dhcp: the server answers one
// datagram at a time, so there is never more than one Put in flight.
type LeaseStore interface {
	// Load returns every stored lease, expired ones included.
	Load(ctx context.Context) ([]Lease, error)
	// Put inserts or replaces the lease of l.DUID, durably, before
	// returning. It fails when another DUID holds l.IP.
	Put(ctx context.Context, l Lease) error
	// Delete removes duid's lease; deleting a missing lease is not an error.
	Delete(ctx context.Context, duid []byte) error
}

// storeTimeout bounds one store write, which the reply waits on.
const storeTimeout = 5 * time.Second

// load restores the stored leases into the pool.
func (s *Server) load(ctx context.Context) error {
	ls, err := s.cfg.Leases.Load(ctx)
	if err != nil {
		return fmt.Errorf("dhcp6: load leases: %w", err)
	}
	n := 0
	for _, l := range ls {
		if s.leases.restore(string(l.DUID), l.IP, l.Expiry) {
			n++
		}
	}
	s.log.Info("dhcp6 leases loaded", "count", n, "outside_range", len(ls)-n)
	return nil
}

// persist stores key's lease of a until exp, first deleting the stored
// leases of clients whose expired addresses went to others. Without a
// store it does nothing.
func (s *Server) persist(key string, mac net.HardwareAddr, a netip.Addr, exp time.Time) error {
	if s.cfg.Leases == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	gone := s.leases.takeGone()
	for i, g := range gone {
		if err := s.cfg.Leases.Delete(ctx, []byte(g)); err != nil {
			s.leases.keepGone(gone[i:])
			return fmt.Errorf("delete the expired lease of DUID %x: %w", g, err)
		}
	}
	if err := s.cfg.Leases.Put(ctx, Lease{DUID: []byte(key), MAC: mac, IP: a, Expiry: exp}); err != nil {
		return fmt.Errorf("store the lease of %v for DUID %x: %w", a, key, err)
	}
	return nil
}

// forget deletes key's stored lease after a Release or Decline. A failure
// only leaves a lease that expires; it is logged.
func (s *Server) forget(key string) {
	if s.cfg.Leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := s.cfg.Leases.Delete(ctx, []byte(key)); err != nil {
		s.log.Warn("dhcp6 released lease stays stored until it expires", "duid", fmt.Sprintf("%x", key), "err", err)
	}
}
