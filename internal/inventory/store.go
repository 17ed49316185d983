package inventory

import (
	"context"
	"net"
	"time"
)

// Store is the fleet's durable record. Every method is safe for concurrent
// use. Errors about the caller's input wrap ErrNotFound, ErrConflict or
// ErrInvalid in an [*Error]; anything else is the database failing.
//
// A Store is never on the DHCP/TFTP hot path except for leases: DHCP calls
// PutLease before each ACK, so it must be durable (fsynced or committed to
// PostgreSQL) before it returns.
type Store interface {
	Machines
	Profiles
	Leases
	Leases6
	Events
	Images
	ImageVersions
	BootRecords
	Tokens
	Audit
	Servers
	Secrets
	ImageCopies
	HostKeyStore
	Power
	NextBoots
	ScheduleRuns
	PowerSchedules
	// Close releases the database. The store must not be used afterwards.
	Close() error
}

// Machines is the machine half of a Store.
type Machines interface {
	// ListMachines returns matching machines ordered by MAC.
	ListMachines(ctx context.Context, f MachineFilter) ([]Machine, error)
	GetMachine(ctx context.Context, mac net.HardwareAddr) (Machine, error)
	// CreateMachine adds m. ErrConflict for a taken MAC, name or IP;
	// ErrInvalid (field profile) when m.Profile names no profile.
	CreateMachine(ctx context.Context, m Machine) (Machine, error)
	// UpdateMachine replaces every field of the machine with m.MAC, the
	// boot status fields included. ErrNotFound when it does not exist.
	UpdateMachine(ctx context.Context, m Machine) (Machine, error)
	// SetStatus records a boot step without touching the admin's fields.
	// A zero at or nil addr leaves that field as it was.
	SetStatus(ctx context.Context, mac net.HardwareAddr, s State, at time.Time, addr net.IP) error
	DeleteMachine(ctx context.Context, mac net.HardwareAddr) error
}

// Profiles is the profile half of a Store.
type Profiles interface {
	// ListProfiles returns every profile ordered by name.
	ListProfiles(ctx context.Context) ([]Profile, error)
	GetProfile(ctx context.Context, name string) (Profile, error)
	CreateProfile(ctx context.Context, p Profile) (Profile, error)
	UpdateProfile(ctx context.Context, p Profile) (Profile, error)
	// DeleteProfile fails with ErrConflict while a machine uses the profile.
	DeleteProfile(ctx context.Context, name string) error
}

// Leases is the DHCP lease table.
type Leases interface {
	// ListLeases returns every lease, expired ones included, ordered by IP.
	ListLeases(ctx context.Context) ([]Lease, error)
	// GetLease returns mac's lease, expired or not, by the table's key: the
	// NBD server asks it on every connect, so it must not scan the table.
	// ErrNotFound when mac has none.
	GetLease(ctx context.Context, mac net.HardwareAddr) (Lease, error)
	// PutLease inserts or replaces the lease of l.MAC and is durable when it
	// returns. When another MAC holds l.IP it fails with a *LeaseTaken
	// (an ErrConflict) naming that lease, unless l.Replaces names it as
	// it still is: then it is deleted in the same transaction. So an
	// address never belongs to two MACs, even written by two servers.
	PutLease(ctx context.Context, l Lease) error
	// DeleteLease removes mac's lease; a missing lease is not an error.
	DeleteLease(ctx context.Context, mac net.HardwareAddr) error
}

// LeaseBatcher is implemented by stores that can make many leases durable
// with one commit. DHCP uses it for group commit under load: the leases of
// concurrent REQUESTs wait on one transaction instead of one fsync each.
type LeaseBatcher interface {
	// PutLeases is PutLease for each of ls in one transaction. errs[i] is
	// ls[i]'s own failure (that lease is not written); err means the
	// transaction failed and none was written. Writers sharing a
	// PostgreSQL store should order ls by address, so that two batches
	// lock the same rows in the same order and cannot deadlock.
	PutLeases(ctx context.Context, ls []Lease) (errs []error, err error)
}

// Events is the boot event log.
type Events interface {
	// AddEvent appends e; a zero e.Time means now. The MAC need not be a
	// known machine (unknown machines have timelines too).
	AddEvent(ctx context.Context, e Event) error
	// ListEvents returns matching events, newest first.
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
}
