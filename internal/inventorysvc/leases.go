package inventorysvc

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Leases is the DHCP lease table kept in the inventory. The DHCP server
// writes through it (it is a dhcp.BatchStore) and the NBD root check reads
// it (LeaseIP).
type Leases struct{ s inventory.Leases }

// NewLeases returns the lease table of s.
func NewLeases(s inventory.Leases) *Leases { return &Leases{s} }

var _ dhcp.BatchStore = (*Leases)(nil)

// Load returns every lease, expired ones included.
func (l *Leases) Load(ctx context.Context) ([]dhcp.Lease, error) {
	ls, err := l.s.ListLeases(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dhcp.Lease, len(ls))
	for i, le := range ls {
		out[i] = dhcp.Lease{MAC: le.MAC, IP: le.IP, Expiry: le.Expiry}
	}
	return out, nil
}

// Put writes one lease. It returns once the store has committed (for
// SQLite, fsynced), so no ACK goes out for a lease that is not durable.
func (l *Leases) Put(ctx context.Context, le dhcp.Lease) error {
	return taken(l.s.PutLease(ctx, toInventory(le)))
}

// toInventory is le as the inventory writes it.
func toInventory(le dhcp.Lease) inventory.Lease {
	out := inventory.Lease{MAC: le.MAC, IP: le.IP, Expiry: le.Expiry}
	if r := le.Replaces; r != nil {
		out.Replaces = &inventory.Lease{MAC: r.MAC, IP: r.IP, Expiry: r.Expiry}
	}
	return out
}

// taken turns the inventory's refusal of a taken address into the
// dhcp.TakenError its allocator learns the holder from.
func taken(err error) error {
	var lt *inventory.LeaseTaken
	if errors.As(err, &lt) {
		h := lt.Holder
		return &dhcp.TakenError{Holder: dhcp.Lease{MAC: h.MAC, IP: h.IP, Expiry: h.Expiry}}
	}
	return err
}

// PutBatch implements dhcp.BatchStore: one transaction for all, when the
// store can (SQLite and PostgreSQL both can), so concurrent REQUESTs share
// one commit.
func (l *Leases) PutBatch(ctx context.Context, ls []dhcp.Lease) []error {
	errs := make([]error, len(ls))
	b, ok := l.s.(inventory.LeaseBatcher)
	if !ok {
		for i, le := range ls {
			errs[i] = l.Put(ctx, le)
		}
		return errs
	}
	in := make([]inventory.Lease, len(ls))
	for i, le := range ls {
		in[i] = toInventory(le)
	}
	each, err := b.PutLeases(ctx, in)
	for i := range errs {
		if err != nil {
			errs[i] = err
		} else {
			errs[i] = taken(each[i])
		}
	}
	return errs
}

// Delete removes mac's lease.
func (l *Leases) Delete(ctx context.Context, mac net.HardwareAddr) error {
	return l.s.DeleteLease(ctx, mac)
}

// leaseLookupTimeout bounds LeaseIP's read, which an NBD connect waits on.
const leaseLookupTimeout = 5 * time.Second

// LeaseIP returns the address mac holds an unexpired lease on, for the NBD
// server's check that an export is read from the machine it was issued
// to. It reads one row by MAC; ok is false when there is no live lease or
// the store fails (the check is then skipped, as without DHCP).
func (l *Leases) LeaseIP(mac net.HardwareAddr) (net.IP, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), leaseLookupTimeout)
	defer cancel()
	le, err := l.s.GetLease(ctx, mac)
	if err != nil {
		return nil, false
	}
	if !le.Expiry.After(time.Now()) {
		return nil, false
	}
	return le.IP, true
}
