package mcast

import (
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestFollowKeepsSendersApart: two servers multicast the same content to
// one group; their interleaved datagrams are no loss, a gap in one's
// numbers is, and so is a wrap past 2^32 that skips one; a huge jump
// counts as one loss window.
func TestFollowKeepsSendersApart(t *testing.T) {
	r := &Receiver{}
	now := time.Unix(1, 0)
	type step struct {
		sender, seq, chunk uint32
		lost               uint32
		moved              bool
	}
	for i, s := range []step{
		{sender: 1, seq: 10, chunk: 0},
		{sender: 2, seq: 500, chunk: 7},
		{sender: 1, seq: 11, chunk: 0},
		{sender: 2, seq: 501, chunk: 7},
		{sender: 1, seq: 14, chunk: 1, lost: 2, moved: true},
		{sender: 2, seq: 499, chunk: 7}, // reordered: no loss
		{sender: 3, seq: 1<<32 - 1, chunk: 2},
		{sender: 3, seq: 1, chunk: 2, lost: 1},
		{sender: 3, seq: 1 << 30, chunk: 2, lost: lossWindow},
	} {
		now = now.Add(time.Millisecond)
		lost, _, moved := r.follow(chunkwire.Data{Sender: s.sender, Seq: s.seq, Chunk: s.chunk}, now)
		if lost != s.lost || moved != s.moved {
			t.Fatalf("step %d %+v: lost %d moved %v", i, s, lost, moved)
		}
	}
}

// TestFollowForgetsTheOldestSender: a fifth sender takes the slot of the
// one heard from longest ago, which then starts afresh.
func TestFollowForgetsTheOldestSender(t *testing.T) {
	r := &Receiver{}
	now := time.Unix(1, 0)
	for sender := uint32(1); sender <= maxStreams+1; sender++ {
		now = now.Add(time.Millisecond)
		r.follow(chunkwire.Data{Sender: sender, Seq: 100}, now)
	}
	// Sender 1 was forgotten: a jump in its numbers is no loss now.
	if lost, _, _ := r.follow(chunkwire.Data{Sender: 1, Seq: 200}, now); lost != 0 {
		t.Fatalf("a forgotten sender's gap counted %d lost", lost)
	}
	// Sender 3 is remembered.
	if lost, _, _ := r.follow(chunkwire.Data{Sender: 3, Seq: 103}, now); lost != 2 {
		t.Fatalf("sender 3: %d lost, want 2", lost)
	}
}
