package telemetry

import (
	"hash/fnv"
	"strconv"
	"time"
)

// A fleet's servers record the same boot each on its own: one answers
// DHCP, another sends the kernel or serves the NBD root, a third takes
// the DoneURL. They never coordinate on the hot path; each keeps its
// part as a record of its own, and reads merge the parts (merge.go). This
// file is what a Recorder does differently in a fleet (Config.Server).

// serverTag is the suffix of a fleet member's boot IDs: short, URL-safe,
// and the same for a server at every start, so its records of one boot
// keep their ID across writes.
func serverTag(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// partialGap ends a partial record: an event after this long without one
// opens a new record. What a server serves of one boot comes in a burst
// (the kernel, then the initrd), so its records stay one per boot; a
// record that spanned boots would start long before the boots it holds
// events of, and a read bounded by Since or a limit would miss it.
const partialGap = 2 * time.Minute

// active returns the machine's open boot, or in a fleet opens a partial
// record starting at start: the machine's DHCP went to another server
// (or none of ours). Outside a fleet it is open. Call with mu held.
func (r *Recorder) active(key string, now, start time.Time) *boot {
	b := r.open(key, now)
	if r.cfg.Server == "" {
		return b
	}
	if b != nil && b.Partial && now.Sub(b.touched) > partialGap {
		r.closePartial(b)
		b = nil
	}
	if b != nil {
		return b
	}
	b = r.start(key, start)
	b.Partial = true
	return b
}

// closePartial ends a partial record where this server's own DHCP starts
// a boot, or after partialGap: the events from there on are another
// boot's, or may be. It is no failure of
// the machine's, so it is not counted as one; reads ignore the state of
// a partial record (merge.go). Call with mu held.
func (r *Recorder) closePartial(b *boot) {
	b.State, b.Reason = StateFailed, "closed: this server's DHCP started the next boot, or it served nothing for a while"
	r.publish(b)
}

// touch notes that b changed at now, so quiet queues it. Call with mu
// held.
func (r *Recorder) touch(b *boot, now time.Time) {
	if r.cfg.Server == "" {
		return
	}
	b.touched = now
	if !r.dirty[b] {
		r.dirty[b] = true
		b.dirtySince = now
	}
}

// quiet returns copies of the open boots that changed and have since been
// quiet for Config.Quiet (or changed for 6 Quiet without a pause), and
// forgets they changed. A History stores them, so the other servers of
// the fleet read a boot in progress within seconds, not when it ends. It
// walks only the changed boots.
func (r *Recorder) quiet() []Boot {
	if r.cfg.Server == "" {
		return nil
	}
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Boot
	for b := range r.dirty {
		if now.Sub(b.touched) < r.cfg.Quiet && now.Sub(b.dirtySince) < 6*r.cfg.Quiet {
			continue
		}
		delete(r.dirty, b)
		if b.State == StateBooting && !b.gone {
			out = append(out, r.snapshot(b, b.Start))
		}
	}
	return out
}
