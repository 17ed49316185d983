package nbd

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// budget is what a request's buffers count against until its reply has
// left: its session's MaxBufferBytes and its client address's
// MaxClientBufferBytes, so a client that opens many connections and reads
// no replies stalls at the client's bound instead of one bound per
// connection.
type budget struct {
	session, client *semaphore.Weighted
}

// tryAcquire takes n from both, or from neither.
func (b budget) tryAcquire(n int64) bool {
	if !b.session.TryAcquire(n) {
		return false
	}
	if !b.client.TryAcquire(n) {
		b.session.Release(n)
		return false
	}
	return true
}

// acquire waits for n from both. In-flight work always completes, so it
// waits on no context: replies leaving give the budget back.
func (b budget) acquire(n int64) {
	b.session.Acquire(context.Background(), n)
	b.client.Acquire(context.Background(), n)
}

func (b budget) release(n int64) {
	b.client.Release(n)
	b.session.Release(n)
}

// clientBudgets holds one buffer budget per client address with sessions
// in transmission.
type clientBudgets struct {
	size int64

	mu sync.Mutex
	m  map[string]*clientBudget
}

type clientBudget struct {
	sem  *semaphore.Weighted
	refs int
}

// take returns host's budget and the function that gives the session's
// reference back.
func (c *clientBudgets) take(host string) (*semaphore.Weighted, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*clientBudget{}
	}
	b := c.m[host]
	if b == nil {
		b = &clientBudget{sem: semaphore.NewWeighted(c.size)}
		c.m[host] = b
	}
	b.refs++
	return b.sem, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if b.refs--; b.refs == 0 {
			delete(c.m, host)
		}
	}
}
