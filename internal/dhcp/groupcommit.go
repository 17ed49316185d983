package dhcp

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
)

// BatchStore is a LeaseStore that can make many leases durable with one
// commit. With it, the server group-commits: the leases of REQUESTs handled
// at the same time wait on one transaction and one fsync instead of one
// each, which is what bounds the DORA rate of a durable store.
type BatchStore interface {
	LeaseStore
	// PutBatch is Put for each lease, durably, before returning. errs[i] is
	// ls[i]'s outcome: nil means that lease is stored.
	PutBatch(ctx context.Context, ls []Lease) (errs []error)
}

// maxBatch bounds one group commit, so one transaction stays short.
const maxBatch = 256

// groupCommit batches Puts. There is no goroutine of its own: the first
// caller to find no commit in flight leads and commits everything queued by
// then; callers arriving meanwhile queue, and when the leader is done the
// oldest of them leads the next batch. So a quiet server commits each lease
// at once, and a busy one commits as many as arrived during one fsync.
type groupCommit struct {
	store BatchStore

	mu      sync.Mutex
	pending []*putReq
	busy    bool // a leader is committing
}

type putReq struct {
	l    Lease
	done chan error // buffered: the outcome, or errLead
}

// errLead tells a queued caller that it now leads the next batch.
var errLead = errors.New("lead the next group commit")

// put stores l durably, with whatever other leases are queued.
func (g *groupCommit) put(ctx context.Context, l Lease) error {
	r := &putReq{l: l, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, r)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		if err := <-r.done; err != errLead {
			return err
		}
	}
	g.mu.Lock()
	n := min(len(g.pending), maxBatch)
	batch := g.pending[:n:n]
	g.pending = g.pending[n:]
	g.mu.Unlock()

	// By address: servers sharing a PostgreSQL store then take their row
	// locks in the same order, and two batches cannot deadlock.
	slices.SortStableFunc(batch, func(a, b *putReq) int { return bytes.Compare(a.l.IP.To4(), b.l.IP.To4()) })
	ls := make([]Lease, len(batch))
	for i, b := range batch {
		ls[i] = b.l
	}
	errs := g.store.PutBatch(ctx, ls)
	var own error
	for i, b := range batch {
		if b == r {
			own = errs[i]
		} else {
			b.done <- errs[i]
		}
	}

	g.mu.Lock()
	var next *putReq
	if len(g.pending) > 0 {
		next = g.pending[0]
	} else {
		g.busy = false
		g.pending = nil
	}
	g.mu.Unlock()
	if next != nil {
		next.done <- errLead
	}
	return own
}
