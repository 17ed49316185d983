package dhcp6

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// leases hands out addresses of the range, one per client key (its DUID).
// A client keeps its address while its lease runs and gets it back after
// that unless another took it: an expired lease is only reused once no
// free address is left, so the pool never holds one address twice.
type leases struct {
	first, last netip.Addr
	start       netip.Addr // where the search for a free address starts; first when invalid
	mu          sync.Mutex
	byKey       map[string]lease
	byAddr      map[netip.Addr]string
	// gone are clients whose expired lease went to another client: their
	// stored leases are deleted before the next one is written, so the
	// store never holds one address twice either.
	gone []string
}

type lease struct {
	addr   netip.Addr
	expiry time.Time
}

func newLeases(first, last netip.Addr) *leases {
	return &leases{first: first, last: last, byKey: map[string]lease{}, byAddr: map[netip.Addr]string{}}
}

// restore puts back a lease read from the store, expired or not, so a
// returning client gets its address again. A lease outside the range (it
// was changed) is ignored; of two on one address the later expiry wins.
// It reports whether the lease was kept.
func (l *leases) restore(key string, a netip.Addr, exp time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.Less(l.first) || l.last.Less(a) {
		return false
	}
	if _, dup := l.byKey[key]; dup {
		return false
	}
	if owner, taken := l.byAddr[a]; taken && strings.HasPrefix(owner, elsewhere) {
		// The stored lease is the one another server wrote: it replaces
		// the placeholder, and is never deleted for it.
		delete(l.byKey, owner)
	} else if taken {
		if !l.byKey[owner].expiry.Before(exp) {
			l.gone = append(l.gone, key)
			return false
		}
		delete(l.byKey, owner)
		l.gone = append(l.gone, owner)
	}
	l.take(key, a, exp)
	return true
}

// get returns key's address, leased until now+d: its current one, else a
// free one, else the longest-expired one. ok is false when the range is
// full of running leases.
func (l *leases) get(key string, now time.Time, d time.Duration) (netip.Addr, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.byKey[key]; ok {
		l.byKey[key] = lease{cur.addr, now.Add(d)}
		return cur.addr, true
	}
	var stale netip.Addr
	var staleExp time.Time
	begin := l.first
	if l.start.IsValid() && !l.start.Less(l.first) && !l.last.Less(l.start) {
		begin = l.start
	}
	for a := begin; ; {
		owner, taken := l.byAddr[a]
		if !taken {
			l.take(key, a, now.Add(d))
			return a, true
		}
		if e := l.byKey[owner].expiry; e.Before(now) && (!stale.IsValid() || e.Before(staleExp)) {
			stale, staleExp = a, e
		}
		if a == l.last {
			a = l.first
		} else {
			a = a.Next()
		}
		if a == begin {
			break
		}
	}
	if !stale.IsValid() {
		return netip.Addr{}, false
	}
	old := l.byAddr[stale]
	delete(l.byKey, old)
	if !strings.HasPrefix(old, elsewhere) {
		l.gone = append(l.gone, old)
	}
	l.take(key, stale, now.Add(d))
	return stale, true
}

// expiryOf is the end of key's lease, zero when it holds none.
func (l *leases) expiryOf(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byKey[key].expiry
}

// elsewhere prefixes the key under which an address another server
// leased is held: no client's DUID, and never deleted from the store.
const elsewhere = "\x00elsewhere "

// setStart sets where the search for a free address starts.
func (l *leases) setStart(a netip.Addr) {
	l.mu.Lock()
	l.start = a
	l.mu.Unlock()
}

// takenElsewhere records that another server leased a until exp: key
// loses it, and nobody here gets it before exp.
func (l *leases) takenElsewhere(key string, a netip.Addr, exp time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.byKey[key]; ok && cur.addr == a {
		delete(l.byKey, key)
	}
	k := elsewhere + a.String()
	l.take(k, a, exp)
}

func (l *leases) take(key string, a netip.Addr, exp time.Time) {
	l.byKey[key] = lease{a, exp}
	l.byAddr[a] = key
}

// release frees key's address.
func (l *leases) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.byKey[key]; ok {
		delete(l.byAddr, cur.addr)
		delete(l.byKey, key)
	}
}

// takeGone returns and forgets the clients whose stored leases must go.
func (l *leases) takeGone() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gone
	l.gone = nil
	return g
}

// keepGone puts back clients whose stored leases could not be deleted.
func (l *leases) keepGone(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone = append(keys, l.gone...)
}
