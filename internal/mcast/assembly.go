package mcast

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// Want asks the server for the count chunks from first that are neither
// cached nor on their way: the caller's read-ahead. It does not wait.
// Chunks past the content, or beyond MaxPending, are left out.
func (r *Receiver) Want(first, count uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want(first, count, time.Now())
}

// want does Want with r.mu held.
func (r *Receiver) want(first, count uint32, now time.Time) {
	if r.gaveUp != nil {
		return
	}
	total := chunkwire.Chunks(r.cfg.Size)
	var ranges []chunkwire.Range
	backlog := -1 // unknown until a chunk is to be asked for
	for c := first; c-first < count && c < total; c++ {
		a := r.pend[c]
		switch {
		case a != nil && a.wanted:
			continue
		case a != nil:
			// Arriving because another agent asked: what is missing.
		case r.cfg.Cache.Has(c) || !r.room():
			continue
		default:
			if a = r.start(c, now); a == nil {
				continue
			}
		}
		a.wanted, a.since, a.asked = true, now, now
		if backlog < 0 {
			backlog = min(r.queued(), 1)
		}
		if backlog > 0 {
			// What waits unread in the socket may be this chunk.
			r.deferAsk(a, now)
			continue
		}
		ranges = appendRange(ranges, c, a.need&^a.have)
	}
	if len(ranges) > 0 {
		r.send(0, ranges)
	}
}

// appendRange appends chunk with mask, joining the last range when it is
// the next chunk with the same mask.
func appendRange(ranges []chunkwire.Range, chunk, mask uint32) []chunkwire.Range {
	if n := len(ranges); n > 0 && ranges[n-1].Mask == mask && ranges[n-1].Last()+1 == chunk {
		ranges[n-1].Count++
		return ranges
	}
	return append(ranges, chunkwire.Range{First: chunk, Count: 1, Mask: mask})
}

// room makes room for one more assembly when MaxPending are held, by
// dropping the one other agents asked for that made progress longest
// ago; false when every one held is wanted here. r.mu is held.
func (r *Receiver) room() bool {
	if len(r.pend) < r.cfg.MaxPending {
		return true
	}
	var stalest *assembly
	var chunk uint32
	for c, a := range r.pend {
		if !a.wanted && (stalest == nil || a.progress.Before(stalest.progress)) {
			stalest, chunk = a, c
		}
	}
	if stalest == nil {
		return false
	}
	r.cfg.Cache.Release(chunk)
	delete(r.pend, chunk)
	r.recycle(stalest)
	return true
}

// start begins assembling chunk; nil if the cache has no slot.
func (r *Receiver) start(chunk uint32, now time.Time) *assembly {
	buf, ok := r.cfg.Cache.Reserve(chunk)
	if !ok {
		return nil
	}
	a := r.newAssembly()
	a.buf, a.need, a.since, a.progress, a.slab = buf, fragmentsMask(chunk, r.cfg.Size), now, now, r.cfg.Hub.onSlab(chunk, buf)
	r.pend[chunk] = a
	return a
}

// Wait returns nil once chunk is in the cache, asking for it if nobody
// has. An error means the caller reads the chunk by unicast: ErrSilent,
// ErrLossy, ErrNoSlot, or ctx's.
func (r *Receiver) Wait(ctx context.Context, chunk uint32) error {
	r.mu.Lock()
	if r.cfg.Cache.Has(chunk) {
		r.mu.Unlock()
		return nil
	}
	a := r.pend[chunk]
	if a == nil || !a.wanted {
		r.want(chunk, 1, time.Now())
		a = r.pend[chunk]
	}
	var err error
	switch {
	case r.gaveUp != nil:
		err = r.gaveUp
	case chunk >= chunkwire.Chunks(r.cfg.Size):
		err = fmt.Errorf("mcast: chunk %d past the content's %d", chunk, chunkwire.Chunks(r.cfg.Size))
	case a == nil && r.cfg.Cache.Has(chunk):
		r.mu.Unlock()
		return nil
	case a == nil:
		err = ErrNoSlot
	}
	if err != nil {
		r.st.Fallbacks++
		r.mu.Unlock()
		return err
	}
	ch := r.waitChan()
	a.waiters = append(a.waiters, ch)
	r.mu.Unlock()
	select {
	case err = <-ch:
	case <-ctx.Done():
		r.mu.Lock()
		r.leave(a, ch)
		r.mu.Unlock()
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waitChans = append(r.waitChans, ch)
	if err != nil {
		r.st.Fallbacks++
	}
	return err
}

// take files one datagram of the content. r.mu is held.
func (r *Receiver) take(d chunkwire.Data, now time.Time) {
	r.lastHeard = now
	lost, from, moved := r.follow(d, now)
	r.st.Lost += uint64(lost)
	if r.judgeLoss(1, lost); r.gaveUp != nil {
		return
	}
	// A sender sends a chunk's fragments together: once it has moved to
	// another chunk, what is missing of the last one was lost.
	if moved {
		r.repairIfLost(from, now)
	}
	a := r.pend[d.Chunk]
	if a == nil {
		if r.cfg.Cache.Has(d.Chunk) || d.Chunk >= chunkwire.Chunks(r.cfg.Size) || !r.room() {
			r.st.Duplicates++
			return
		}
		if a = r.start(d.Chunk, now); a == nil {
			return
		}
	}
	bit := uint32(1) << d.Fragment
	off := int(d.Fragment) * chunkwire.FragmentSize
	want := int(min(chunkwire.FragmentSize, r.cfg.Size-int64(d.Chunk)*chunkwire.ChunkSize-int64(off)))
	switch {
	case a.have&bit != 0:
		r.st.Duplicates++
		return
	case a.need&bit == 0 || len(d.Payload) != want:
		return // a datagram of another size of the content: not ours
	}
	a.slab.put(a.buf, d.Chunk, d.Fragment, d.Payload)
	a.have |= bit
	a.progress = now
	r.st.Datagrams++
	r.st.Bytes += uint64(len(d.Payload))
	if a.have == a.need {
		r.cfg.Cache.Commit(d.Chunk, int(min(chunkwire.ChunkSize, r.cfg.Size-int64(d.Chunk)*chunkwire.ChunkSize)))
		r.st.Chunks++
		r.undefer(a)
		delete(r.pend, d.Chunk)
		r.finish(a, nil)
		return
	}
	if d.Flags&chunkwire.FlagEnd != 0 {
		r.repairIfLost(d.Chunk, now)
	}
}

// repairIfLost asks again for the missing fragments of chunk if this
// receiver wants it. r.mu is held.
func (r *Receiver) repairIfLost(chunk uint32, now time.Time) {
	if a := r.pend[chunk]; a != nil && a.wanted {
		r.repair(chunkwire.FlagRepair, []uint32{chunk}, true, now)
	}
}

// repair asks again for the missing fragments of chunks; flags is
// FlagRepair when they were lost, 0 when the request may have been. A
// counted ask fails the chunk past MaxRepairs. r.mu is held.
func (r *Receiver) repair(flags uint16, chunks []uint32, counted bool, now time.Time) {
	ranges := r.repairList[:0]
	for _, c := range chunks {
		a := r.pend[c]
		if counted {
			a.repairs++
		}
		if a.repairs > r.cfg.MaxRepairs {
			r.fail(c, fmt.Errorf("%w: chunk %d asked for %d times, %d of %d fragments arrived", ErrLossy, c, a.repairs, bits.OnesCount32(a.have), bits.OnesCount32(a.need)))
			continue
		}
		r.undefer(a)
		a.asked = now
		ranges = appendRange(ranges, c, a.need&^a.have)
	}
	if len(ranges) > 0 {
		r.send(flags, ranges)
	}
	r.repairList = ranges[:0]
}

// fail ends chunk's assembly with err. r.mu is held.
func (r *Receiver) fail(chunk uint32, err error) {
	a := r.pend[chunk]
	r.undefer(a)
	delete(r.pend, chunk)
	r.cfg.Cache.Release(chunk)
	r.finish(a, err)
}

// tick declares silence, asks again for stalled chunks and drops
// assemblies nobody here asked for that stopped for KeepPartial. It runs
// every RepairAfter/2.
//
// A wanted chunk of which some fragments arrived and then none for
// RepairAfter has lost the rest: it is repaired, and that counts towards
// MaxRepairs. One of which nothing arrived may only be queued behind other
// agents' chunks at the server: it is asked for again when the sender has
// gone quiet for RepairAfter (the request was lost, or the group is cut,
// which Silence settles: not counted), or after AskAgain while the sender
// sends others (counted).
func (r *Receiver) tick(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A tick far later than its period means this process did not run (a
	// host that deschedules a VM, a guest starting systemd on one CPU):
	// the group's datagrams may sit unread in the socket, so the silence
	// is counted again from here rather than from before the stall.
	if !r.lastTick.IsZero() && now.Sub(r.lastTick) >= stallTicks*r.cfg.RepairAfter/2 {
		r.resumed = now
	}
	r.lastTick = now
	var lost, quiet, busy []uint32
	waitingSince := time.Time{}
	// Whether something arrived is judged up to what has been read.
	read := r.caughtUp(now)
	serverQuiet := read.Sub(r.lastHeard) >= r.cfg.RepairAfter
	for c, a := range r.pend {
		if !a.wanted {
			if now.Sub(a.progress) >= r.cfg.KeepPartial {
				r.cfg.Cache.Release(c)
				delete(r.pend, c)
				r.recycle(a)
			}
			continue
		}
		if waitingSince.IsZero() || a.since.Before(waitingSince) {
			waitingSince = a.since
		}
		if a.deferred {
			continue
		}
		idle := read.Sub(latest(a.asked, a.progress)) >= r.cfg.RepairAfter
		switch {
		case a.have != 0 && idle:
			lost = append(lost, c)
		case a.have == 0 && idle && serverQuiet:
			quiet = append(quiet, c)
		case a.have == 0 && read.Sub(a.asked) >= r.cfg.AskAgain:
			busy = append(busy, c)
		}
	}
	quietSince := latest(latest(waitingSince, r.lastHeard), r.resumed)
	if !waitingSince.IsZero() && now.Sub(quietSince) >= r.cfg.Silence && r.queued() == 0 {
		r.giveUp(fmt.Errorf("%w: %v, for %v (server answered the hello: %v)", ErrSilent, r.cfg.Group, r.cfg.Silence, r.st.Announced),
			"multicast: nothing arrived from the group; reading by unicast", "silence", r.cfg.Silence, "server_answered", r.st.Announced)
		return
	}
	r.repair(chunkwire.FlagRepair, lost, true, now)
	r.repair(0, quiet, false, now)
	r.repair(0, busy, true, now)
	r.askDeferred(read, now)
}

// giveUp stops this receiver's use of the group: every wanted chunk and
// every later Wait fail with err, which the caller takes as "read by
// unicast". r.mu is held.
func (r *Receiver) giveUp(err error, msg string, attrs ...any) {
	if r.gaveUp != nil {
		return
	}
	r.gaveUp = err
	r.st.Silent = r.st.Silent || errors.Is(err, ErrSilent)
	r.st.Lossy = r.st.Lossy || errors.Is(err, ErrLossy)
	r.log.Warn(msg, append(attrs, "group", r.cfg.Group)...)
	for c, a := range r.pend {
		if a.wanted {
			r.fail(c, err)
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
