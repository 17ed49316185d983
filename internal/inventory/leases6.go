package inventory

import (
	"context"
	"net"
	"time"
)

// MaxDUID is the longest DUID a client may send: 2 octets of type and at
// most 128 of data (RFC 8415 section 11.1).
const MaxDUID = 130

// Lease6 is a DHCPv6 lease (IA_NA) in dhcp6 full mode: IP belongs to the
// client that sent DUID until Expiry.
//
// The key is the DUID, not the MAC: it is how DHCPv6 names a client (RFC
// 8415 section 11), it is what the dhcp6 server keys its pool by, and the
// MAC is not always known. EDK II sends a DUID-UUID built from the SMBIOS
// UUID, and the MAC then comes only from an EUI-64 link-local source
// address, which privacy addresses and relays hide. One DUID holds one
// address: dhcp6 answers every IA_NA of a client with the same one.
// Addresses and DUIDs are each unique across Lease6s; they live in a
// table of their own, so a machine holds a Lease and a Lease6 at once.
type Lease6 struct {
	DUID   []byte           // the client identifier (option 1) as sent; 1 to MaxDUID bytes
	MAC    net.HardwareAddr // the machine's MAC when dhcp6 could tell; nil otherwise
	IP     net.IP           // IPv6
	Expiry time.Time
}

// Validate checks l.
func (l *Lease6) Validate() error {
	if len(l.DUID) == 0 || len(l.DUID) > MaxDUID {
		return invalid("duid", "want 1 to %d bytes, got %d", MaxDUID, len(l.DUID))
	}
	if len(l.MAC) != 0 && len(l.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC or none, got %q", l.MAC.String())
	}
	if len(l.IP) != net.IPv6len || l.IP.To4() != nil {
		return invalid("ip", "want an IPv6 address, got %v", l.IP)
	}
	if l.Expiry.IsZero() {
		return invalid("expiry", "required")
	}
	return nil
}

// Leases6 is the DHCPv6 lease table.
type Leases6 interface {
	// ListLeases6 returns every DHCPv6 lease, expired ones included,
	// ordered by address.
	ListLeases6(ctx context.Context) ([]Lease6, error)
	// PutLease6 inserts or replaces the lease of l.DUID and is durable
	// when it returns. ErrConflict when another DUID holds l.IP: the
	// caller must delete that lease first, so an address never belongs
	// to two clients.
	PutLease6(ctx context.Context, l Lease6) error
	// DeleteLease6 removes duid's lease; a missing lease is not an error.
	DeleteLease6(ctx context.Context, duid []byte) error
}
