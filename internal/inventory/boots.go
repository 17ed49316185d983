package inventory

import (
	"context"
	"net"
	"time"
)

// BootRecord is one server's record of a machine's boot as the inventory
// keeps it once it has ended (or left the server's memory unfinished, or,
// in a fleet, has been quiet for a few seconds). Record is the timeline
// as package telemetry encodes it; the store keeps it whole and only
// indexes the fields it filters on, so the timeline can grow fields
// without a migration.
type BootRecord struct {
	ID     string // unique; the telemetry boot ID, e.g. 525400123456-1767225600000 (a fleet's add a server tag)
	MAC    net.HardwareAddr
	Start  time.Time // the boot's first DHCP packet, or the record's first event
	State  string    // booting, complete or failed, as telemetry says
	Record []byte    // JSON, opaque to the store
}

// BootFilter selects stored boots. Zero fields match everything.
type BootFilter struct {
	MAC   net.HardwareAddr
	Since time.Time // boots that started at or after Since
	Until time.Time // boots that started before Until
	Limit int       // at most this many, newest first; 0 for all
}

// BootRecords is the boot history: records of boots that ended (and in a
// fleet of those in progress), written in batches off the hot paths and
// pruned by age and count.
type BootRecords interface {
	// PutBoots inserts each record, or replaces the one with its ID (a
	// boot that gains an NBD session after it ended is written again),
	// in one transaction: all are stored or none.
	PutBoots(ctx context.Context, bs []BootRecord) error
	// ListBoots returns matching records, newest Start first (ID breaks
	// ties, descending).
	ListBoots(ctx context.Context, f BootFilter) ([]BootRecord, error)
	// GetBoot returns the record with id; ErrNotFound when there is none.
	GetBoot(ctx context.Context, id string) (BootRecord, error)
	// PruneBoots deletes at most max records, oldest first, among those
	// that started before before or are not among the keep newest. It
	// returns how many it deleted; fewer than max means it is done. The
	// bound keeps each transaction short, since DHCP's lease commits
	// wait for the same writer.
	PruneBoots(ctx context.Context, before time.Time, keep, max int) (int, error)
}

// Validate checks the fields the store indexes.
func (b *BootRecord) Validate() error {
	switch {
	case b.ID == "" || len(b.ID) > 64:
		return invalid("id", "want a boot ID of 1 to 64 characters, got %q", b.ID)
	case len(b.MAC) == 0:
		return invalid("mac", "want the machine's MAC, got none")
	case b.Start.IsZero():
		return invalid("start", "want the time of the boot's first DHCP packet, got none")
	case b.State == "":
		return invalid("state", "want booting, complete or failed, got none")
	case len(b.Record) == 0:
		return invalid("record", "want the boot's timeline, got nothing")
	}
	return nil
}
