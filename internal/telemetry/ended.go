package telemetry

import "time"

// publish hands a copy of b to the Ended queue without waiting: the hooks
// that call it run on the DHCP, TFTP and HTTP paths under r.mu. The copy
// is bounded (per-boot limits), so this stays O(1). Call with mu held.
func (r *Recorder) publish(b *boot) {
	delete(r.dirty, b)
	if r.ended == nil {
		return
	}
	r.offer(r.snapshot(b, b.Start))
}

// offer puts rec on the Ended queue without waiting: a full queue drops
// it and counts the drop, which the History logs.
func (r *Recorder) offer(rec Boot) {
	select {
	case r.ended <- rec:
	default:
		r.dropped.Add(1)
		r.m.recordsDropped.Inc()
	}
}

// Ended returns the queue of boots that ended, or nil when Config.Ended
// is 0. A boot can arrive more than once (an NBD session added after it
// ended); the last copy is the whole record.
func (r *Recorder) Ended() <-chan Boot { return r.ended }

// Sweep fails the boots that stayed open longer than StaleAfter, so they
// reach the Ended queue even when their machine never comes back. It
// walks every kept boot under the lock: call it every few seconds at
// most, not per packet.
func (r *Recorder) Sweep() {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.order[r.head:] {
		if !b.gone && b.State == StateBooting && now.Sub(b.Start) > r.cfg.StaleAfter {
			r.fail(b, "no boot complete within "+r.cfg.StaleAfter.String(), false)
		}
	}
}

// Open returns copies of the boots still in progress, for a History to
// store at shutdown.
func (r *Recorder) Open() []Boot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Boot
	for _, b := range r.order[r.head:] {
		if !b.gone && b.State == StateBooting {
			out = append(out, r.snapshot(b, b.Start))
		}
	}
	return out
}

// settle shows a stored boot as a read of the live one would: open longer
// than StaleAfter reads as failed.
func (r *Recorder) settle(b *Boot, now time.Time) {
	if b.State == StateBooting && now.Sub(b.Start) > r.cfg.StaleAfter {
		b.State, b.Reason = StateFailed, "no boot complete within "+r.cfg.StaleAfter.String()
	}
}
