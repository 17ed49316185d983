package mcast

// A block-device daemon must not wait on reclaim to answer the reads
// reclaim itself may need, so taking a chunk from the group allocates
// nothing: a Receiver allocates its MaxPending assemblies, and the
// channels its waiters are told on, when it is made, and reuses them.

// waitersPerChunk is how many waits on one chunk the preallocated room
// holds; more append (and allocate) as usual.
const waitersPerChunk = 2

// preallocChans is how many Wait channels a Receiver starts with: the
// reads a machine has in flight at once, which the kernel's NBD client
// keeps to a few.
const preallocChans = 16

// preallocate fills the free lists.
func (r *Receiver) preallocate() {
	n := r.cfg.MaxPending
	as := make([]assembly, n)
	ws := make([]chan error, n*waitersPerChunk)
	r.free = make([]*assembly, n)
	for i := range as {
		as[i].waiters = ws[i*waitersPerChunk : i*waitersPerChunk : (i+1)*waitersPerChunk]
		r.free[i] = &as[i]
	}
	r.waitChans = make([]chan error, preallocChans)
	for i := range r.waitChans {
		r.waitChans[i] = make(chan error, 1)
	}
}

// newAssembly is a zeroed assembly, from the free list if it has one.
// r.mu is held.
func (r *Receiver) newAssembly() *assembly {
	if n := len(r.free); n > 0 {
		a := r.free[n-1]
		r.free = r.free[:n-1]
		return a
	}
	return &assembly{}
}

// recycle zeroes a, which nothing references any more, onto the free
// list; its waiters' room is kept. r.mu is held.
func (r *Receiver) recycle(a *assembly) {
	*a = assembly{waiters: a.waiters[:0]}
	r.free = append(r.free, a)
}

// finish tells a's waiters how it ended (nil: committed) and recycles it.
// Each waiter's channel has room for the one result, so this never
// blocks. r.mu is held.
func (r *Receiver) finish(a *assembly, err error) {
	for _, ch := range a.waiters {
		ch <- err
	}
	r.recycle(a)
}

// waitChan is an empty channel for one Wait. r.mu is held.
func (r *Receiver) waitChan() chan error {
	if n := len(r.waitChans); n > 0 {
		ch := r.waitChans[n-1]
		r.waitChans = r.waitChans[:n-1]
		return ch
	}
	return make(chan error, 1)
}

// leave takes ch, a Wait's on a that gave up, back: from a's waiters if a
// is still assembling, else after draining the result finish sent. Both
// happen under r.mu, so one of the two holds. r.mu is held.
func (r *Receiver) leave(a *assembly, ch chan error) {
	select {
	case <-ch:
	default:
		for i, w := range a.waiters {
			if w == ch {
				a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
				break
			}
		}
	}
	r.waitChans = append(r.waitChans, ch)
}
