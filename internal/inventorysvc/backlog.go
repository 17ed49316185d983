package inventorysvc

import (
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/machineview"
)

// Recording a DHCP sighting is one or two store transactions, and with
// SQLite those share the single writer with DHCP's lease commits, which the
// clients wait for. A lab powering on, or a load test with thousands of new
// MACs a second, would otherwise turn every DISCOVER into a write that
// delays an ACK. So sightings wait in a backlog and are written at a steady
// pace, a short burst at once and then recordRate a second; and discovered
// machines reach the fleet view in batches.
const (
	recordRate  = 50    // sightings written per second once the burst is used
	recordBurst = 100   // written at once after a quiet spell
	maxBacklog  = 65536 // sightings waiting; more are dropped (the machine sends DHCP again)

	// viewBatch is the least time between two additions of discovered
	// machines to the fleet view. Each addition copies the view, so a burst
	// of new machines is added in batches, not one copy each. A discovered
	// machine boots the same as an unknown one, so the delay changes no DHCP
	// answer.
	viewBatch = 250 * time.Millisecond
)

// backlog is the sightings not yet written, one per MAC (the first seen),
// oldest first.
type backlog struct {
	queue   []sighting
	queued  map[string]bool // by MAC string
	allowAt time.Time       // when the next sighting may be written
}

func (b *backlog) push(s sighting) {
	k := s.mac.String()
	if b.queued[k] || len(b.queue) >= maxBacklog {
		return
	}
	b.queued[k] = true
	b.queue = append(b.queue, s)
}

// closed is ready at once, for a select.
var closed = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// ready returns a channel that is ready when the next sighting may be
// written; nil (never ready) when there is none.
func (b *backlog) ready(now time.Time) <-chan time.Time {
	switch {
	case len(b.queue) == 0:
		return nil
	case !now.Before(b.allowAt):
		return closed
	}
	return time.After(b.allowAt.Sub(now))
}

// pop takes the oldest sighting and spends one token of the pace.
func (b *backlog) pop(now time.Time) sighting {
	s := b.queue[0]
	b.queue[0] = sighting{}
	b.queue = b.queue[1:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go after a burst
	}
	delete(b.queued, s.mac.String())
	const every = time.Second / recordRate
	if floor := now.Add(-recordBurst * every); b.allowAt.Before(floor) {
		b.allowAt = floor // quiet for a while: the full burst is available
	}
	b.allowAt = b.allowAt.Add(every)
	return s
}

// discoveries adds newly recorded machines to the fleet view: at once when
// the last addition is viewBatch old, else in one batch when it is.
type discoveries struct {
	view    *machineview.View
	pending map[string]net.HardwareAddr // by MAC string; recorded, not yet in the view
	last    time.Time                   // last addition to the view
	timer   <-chan time.Time            // set while pending waits
}

func (d *discoveries) add(mac net.HardwareAddr, now time.Time) {
	d.pending[mac.String()] = mac
	if d.timer != nil {
		return
	}
	if wait := d.last.Add(viewBatch).Sub(now); wait > 0 {
		d.timer = time.After(wait)
		return
	}
	d.flush(now)
}

func (d *discoveries) flush(now time.Time) {
	macs := make([]net.HardwareAddr, 0, len(d.pending))
	for _, m := range d.pending {
		macs = append(macs, m)
	}
	d.view.AddDiscovered(macs...)
	clear(d.pending)
	d.last, d.timer = now, nil
}
