package inventory

import (
	"fmt"
	"time"
)

// LeaseTaken is the ErrConflict a lease write gets when another MAC
// holds the address. Holder is that lease as the store has it, so that a
// DHCP server sharing the store learns what another server leased
// without reading the whole table.
type LeaseTaken struct {
	Holder Lease
}

func (e *LeaseTaken) Error() string { return e.asError().Error() }

// Unwrap makes errors.Is(err, ErrConflict) and errors.As(err, **Error)
// work as for any conflict about the field ip.
func (e *LeaseTaken) Unwrap() error { return e.asError() }

func (e *LeaseTaken) asError() *Error {
	return &Error{Kind: ErrConflict, Field: "ip", Msg: fmt.Sprintf("%s is leased to %s until %s; delete that lease first",
		e.Holder.IP, e.Holder.MAC, e.Holder.Expiry.UTC().Format(time.RFC3339))}
}
