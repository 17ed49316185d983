package inventorysvc

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// sighting is one DHCPDISCOVER, waiting to be recorded.
type sighting struct {
	mac net.HardwareAddr
	at  time.Time
}

// Observer wraps next (may be nil) so every DHCPDISCOVER also reaches the
// worker in Run: unknown machines are recorded as discovered, known ones
// as booting. It never blocks.
func (s *Service) Observer(next dhcp.Observer) dhcp.Observer {
	return observer{s: s, next: next}
}

type observer struct {
	s    *Service
	next dhcp.Observer
}

func (o observer) DHCPPacket(mac net.HardwareAddr, t dhcpv4.MessageType, c pxe.Client) {
	if o.next != nil {
		o.next.DHCPPacket(mac, t, c)
	}
	if t != dhcpv4.MessageTypeDiscover {
		return
	}
	select {
	case o.s.seen <- sighting{mac: append(net.HardwareAddr(nil), mac...), at: time.Now()}:
	default:
	}
}

// work records sightings at the backlog's pace, adds the machines it
// discovers to the view in batches, and reloads the view on each tick.
func (s *Service) work(ctx context.Context, tick <-chan time.Time) error {
	d := discoveries{view: s.view, pending: map[string]net.HardwareAddr{}}
	b := backlog{queued: map[string]bool{}}
	for {
		select {
		case <-ctx.Done():
			return nil
		case sg := <-s.seen:
			if d.pending[sg.mac.String()] == nil { // else recorded, not yet in the view
				b.push(sg)
			}
		case <-b.ready(time.Now()):
			if sg := b.pop(time.Now()); s.record(ctx, sg) {
				d.add(sg.mac, time.Now())
			}
		case <-d.timer:
			d.flush(time.Now())
		case <-tick:
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reload fleet view", "err", err)
			}
		}
	}
}

// record notes one DHCPDISCOVER and reports whether it created a
// discovered machine, which the caller adds to the view. Store errors are
// logged, never fatal: the boot itself goes on from the in-memory view.
func (s *Service) record(ctx context.Context, sg sighting) bool {
	if m, known := s.view.Machine(sg.mac); known {
		st := inventory.StateBooting
		if !m.Enrolled {
			st = inventory.StateDiscovered // stays listed as discovered until an admin enrolls it
		}
		err := s.store.SetStatus(ctx, sg.mac, st, sg.at, nil)
		if err != nil && !errors.Is(err, inventory.ErrNotFound) {
			s.log.Warn("record boot start", "mac", sg.mac.String(), "err", err)
		}
		return false
	}
	if !s.cfg.Discover {
		return false
	}
	_, err := s.store.CreateMachine(ctx, inventory.Machine{MAC: sg.mac, State: inventory.StateDiscovered, LastBoot: sg.at})
	if errors.Is(err, inventory.ErrConflict) {
		return false // another server of the fleet got there first; its Refresh brings it
	}
	if err != nil {
		s.log.Warn("record discovered machine", "mac", sg.mac.String(), "err", err)
		return false
	}
	s.log.Info("discovered machine", "mac", sg.mac.String(), "hint", "enroll it with: bootfleet machine set "+sg.mac.String()+" --profile NAME")
	s.store.AddEvent(ctx, inventory.Event{Time: sg.at, MAC: sg.mac, Kind: "discovered"})
	return true
}
