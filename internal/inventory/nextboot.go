package inventory

import (
	"context"
	"net"
)

// NextBootLocal is the next-boot target that sends a machine to its local
// disk: its boot script exits to the firmware's next boot device.
const NextBootLocal = "local"

// NextBoots holds one-shot boot overrides: a machine's next network boot
// uses its override's target instead of its profile, then the override
// is gone. They live in the shared store so that whichever server answers
// that boot sees it, and only one server takes it.
type NextBoots interface {
	// SetNextBoot sets mac's override to target, a profile name or
	// NextBootLocal; "" removes it. ErrNotFound (field mac) when no
	// machine has that MAC; ErrInvalid (field target) when no profile is
	// called target.
	SetNextBoot(ctx context.Context, mac net.HardwareAddr, target string) error
	// GetNextBoot returns mac's override, or "" for none. It only reads,
	// so a boot server can ask it on every script without writing.
	GetNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error)
	// TakeNextBoot returns mac's override and deletes it in one step: of
	// several servers taking at once, one gets it and the others "".
	TakeNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error)
}
