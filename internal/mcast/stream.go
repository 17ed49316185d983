package mcast

import (
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// maxStreams is how many senders a Receiver follows at once: the servers
// of a fleet that multicast the same content to its group, and a server
// that restarted under a new sender id.
const maxStreams = 4

// stream is what a Receiver remembers of one sender's datagrams.
type stream struct {
	sender    uint32
	lastSeq   uint32
	lastChunk uint32
	heard     time.Time // zero: the slot is free
}

// lossWindow is how many datagrams, taken or lost, the loss rate is
// judged over.
const lossWindow = 512

// follow counts d's place in its sender's sequence: the datagrams lost
// before it, and whether the sender moved on from another chunk, whose
// missing fragments are then lost. r.mu is held.
func (r *Receiver) follow(d chunkwire.Data, now time.Time) (lost uint32, movedFrom uint32, moved bool) {
	s := r.stream(d.Sender, now)
	if !s.heard.IsZero() {
		// Sequence numbers wrap; a datagram from behind (reordered) is
		// neither a loss nor a new position. A gap counts as a window at
		// most: one datagram, forged or from a sender that jumped, must not
		// count for more than a full window of losses.
		if gap := d.Seq - s.lastSeq - 1; gap < 1<<31 {
			lost = min(gap, lossWindow)
			s.lastSeq = d.Seq
		}
		moved, movedFrom = s.lastChunk != d.Chunk, s.lastChunk
	} else {
		s.lastSeq = d.Seq
	}
	s.sender, s.lastChunk, s.heard = d.Sender, d.Chunk, now
	return lost, movedFrom, moved
}

// stream returns the slot of sender: its own, a free one, or the one
// heard from longest ago, cleared.
func (r *Receiver) stream(sender uint32, now time.Time) *stream {
	oldest := &r.streams[0]
	for i := range r.streams {
		s := &r.streams[i]
		if !s.heard.IsZero() && s.sender == sender {
			return s
		}
		if s.heard.Before(oldest.heard) {
			oldest = s
		}
	}
	*oldest = stream{}
	return oldest
}

// judgeLoss adds taken and lost datagrams to the window and, once it is
// full, gives up with ErrLossy if more than MaxLoss of it was lost. r.mu
// is held.
func (r *Receiver) judgeLoss(taken, lost uint32) {
	r.winTaken += taken
	r.winLost += lost
	total := r.winTaken + r.winLost
	if total < lossWindow {
		return
	}
	rate := float64(r.winLost) / float64(total)
	r.winTaken, r.winLost = 0, 0
	if rate > r.cfg.MaxLoss {
		r.giveUp(ErrLossy, "multicast: this machine loses too much of the group; reading by unicast", "loss", rate, "max_loss", r.cfg.MaxLoss)
	}
}
