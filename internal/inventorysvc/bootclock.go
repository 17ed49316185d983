package inventorysvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// BootClock wraps next so a completed boot also marks the machine booted
// in the store and adds a boot-complete event. The store is written off
// the request path: the machine's "done" request never waits for it.
func (s *Service) BootClock(next httpboot.BootClock) httpboot.BootClock {
	return bootClock{s: s, next: next}
}

type bootClock struct {
	s    *Service
	next httpboot.BootClock
}

func (b bootClock) Complete(mac net.HardwareAddr) (time.Duration, bool) {
	took, ok := b.next.Complete(mac)
	go b.s.recordComplete(append(net.HardwareAddr(nil), mac...), took, ok)
	return took, ok
}

// recordComplete writes one completed boot; took is valid if timed.
func (s *Service) recordComplete(mac net.HardwareAddr, took time.Duration, timed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	st := inventory.StateBooted
	if m, ok := s.view.Machine(mac); ok && !m.Enrolled {
		st = inventory.StateDiscovered
	}
	// A zero time keeps last_boot, which is when this boot started.
	err := s.store.SetStatus(ctx, mac, st, time.Time{}, nil)
	if err != nil && !errors.Is(err, inventory.ErrNotFound) {
		s.log.Warn("record boot complete", "mac", mac.String(), "err", err)
	}
	details := "unknown duration"
	if timed {
		details = fmt.Sprintf("%.2fs since first DHCP packet", took.Seconds())
	}
	s.store.AddEvent(ctx, inventory.Event{Time: now, MAC: mac, Kind: "boot-complete", Details: details})
}
