package inventorysvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Leases6 is the DHCPv6 lease table kept in the inventory, beside the
// IPv4 one. The DHCPv6 server writes through it (it is a
// dhcp6.LeaseStore).
type Leases6 struct{ s inventory.Leases6 }

// NewLeases6 returns the DHCPv6 lease table of s.
func NewLeases6(s inventory.Leases6) *Leases6 { return &Leases6{s} }

var _ dhcp6.LeaseStore = (*Leases6)(nil)

// Load returns every DHCPv6 lease, expired ones included.
func (l *Leases6) Load(ctx context.Context) ([]dhcp6.Lease, error) {
	ls, err := l.s.ListLeases6(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dhcp6.Lease, len(ls))
	for i, le := range ls {
		a, _ := netip.AddrFromSlice(le.IP)
		out[i] = dhcp6.Lease{DUID: le.DUID, MAC: le.MAC, IP: a, Expiry: le.Expiry}
	}
	return out, nil
}

// Put writes one lease and returns once the store has committed, so no
// Reply goes out for a lease that is not durable. An address another
// client holds (another server of the fleet leased it) wraps
// dhcp6.ErrTaken.
func (l *Leases6) Put(ctx context.Context, le dhcp6.Lease) error {
	err := l.s.PutLease6(ctx, inventory.Lease6{DUID: le.DUID, MAC: le.MAC, IP: net.IP(le.IP.AsSlice()), Expiry: le.Expiry})
	if errors.Is(err, inventory.ErrConflict) {
		return fmt.Errorf("%w: %w", dhcp6.ErrTaken, err)
	}
	return err
}

// Delete removes duid's lease.
func (l *Leases6) Delete(ctx context.Context, duid []byte) error {
	return l.s.DeleteLease6(ctx, duid)
}
