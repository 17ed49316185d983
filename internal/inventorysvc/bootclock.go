package inventorysvc

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// BootClock wraps next so a completed boot also marks the machine booted
// in the store. The store is written off the request path: the machine's
// "done" request never waits for it. The completion itself is next's to
// keep: the boot record (package telemetry) holds its time and duration.
func (s *Service) BootClock(next httpboot.BootClock) httpboot.BootClock {
	return bootClock{s: s, next: next}
}

type bootClock struct {
	s    *Service
	next httpboot.BootClock
}

func (b bootClock) Complete(mac net.HardwareAddr) (time.Duration, bool) {
	took, ok := b.next.Complete(mac)
	go b.s.markBooted(append(net.HardwareAddr(nil), mac...))
	return took, ok
}

// markBooted sets the state of a machine whose boot completed.
func (s *Service) markBooted(mac net.HardwareAddr) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := inventory.StateBooted
	if m, ok := s.view.Machine(mac); ok && !m.Enrolled {
		st = inventory.StateDiscovered
	}
	// A zero time keeps last_boot, which is when this boot started.
	err := s.store.SetStatus(ctx, mac, st, time.Time{}, nil)
	if err != nil && !errors.Is(err, inventory.ErrNotFound) {
		s.log.Warn("record boot complete", "mac", mac.String(), "err", err)
	}
}
