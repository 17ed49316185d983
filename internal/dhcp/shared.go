package dhcp

import (
	"bytes"
	"context"
)

// When several servers answer one LAN from one lease store (Config.Peers),
// each allocator's maps are a picture of a table the others write too.
// The store keeps that picture from doing harm (a lease whose address
// another MAC holds is refused, TakenError); these keep it from going
// stale: the holder a refused commit learns of, a reread of the whole
// table every leaseRefresh and after each refusal, and each server's own
// place in the range to start looking for free addresses.

// setShared records whether other servers share the store, and this
// server's slot i of n among them, which picks where in the range its
// search for never-used addresses starts.
func (a *allocator) setShared(shared bool, i, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shared && !shared {
		clear(a.touched)
	}
	a.shared = shared
	if n < 1 || i < 0 || i >= n {
		i, n = 0, 1
	}
	a.pool.setOrigin(a.start + uint32(a.pool.size()*uint64(i)/uint64(n)))
}

// touch notes a change to byIP at u made by this server. Call with mu held.
func (a *allocator) touch(u uint32) {
	a.gen++
	if a.shared {
		a.touched[u] = a.gen
	}
}

// kickRefresh asks the server for a reread of the store soon; it never blocks.
func (a *allocator) kickRefresh() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// learn records l, which the store says holds its address, in place of
// whatever this server thought. Call with mu held.
func (a *allocator) learn(l Lease) {
	ip := l.IP.To4()
	k, ok := keyOf(l.MAC)
	if ip == nil || !ok {
		return
	}
	u := ip2u(ip)
	if cur, had := a.byIP[u]; had && !bytes.Equal(cur.MAC, l.MAC) {
		if ck, ok := keyOf(cur.MAC); ok && a.byMAC[ck] == u {
			delete(a.byMAC, ck)
		}
	}
	if prev, had := a.byMAC[k]; had && prev != u {
		delete(a.byIP, prev)
		a.pool.pushFreed(prev)
	}
	l.Replaces = nil
	a.byIP[u] = l
	a.byMAC[k] = u
	a.touch(u)
}

// refresh rereads every lease from the store and makes it this server's
// picture, except where this server changed an address since the read
// began (its change is newer) or is writing one now. It returns how many
// addresses changed hands.
func (a *allocator) refresh(ctx context.Context) (int, error) {
	a.mu.Lock()
	since := a.gen
	a.mu.Unlock()
	leases, err := a.store.Load(ctx)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Addresses where this server's picture is newer than the read: it
	// changed them since the read began, or is writing them or their
	// MAC's lease now.
	mine := map[uint32]bool{}
	for u, g := range a.touched {
		if g <= since {
			delete(a.touched, u)
		} else {
			mine[u] = true
		}
	}
	for u := range a.committing {
		mine[u] = true
	}
	for k := range a.busy {
		if u, ok := a.byMAC[k]; ok {
			mine[u] = true
		}
	}
	fresh := make(map[uint32]Lease, len(leases))
	byMAC := make(map[macKey]uint32, len(leases))
	for u := range mine {
		if l, ok := a.byIP[u]; ok {
			fresh[u] = l
			if k, ok := keyOf(l.MAC); ok {
				byMAC[k] = u
			}
		}
	}
	for _, l := range leases {
		ip := l.IP.To4()
		k, ok := keyOf(l.MAC)
		if ip == nil || !ok {
			continue
		}
		u := ip2u(ip)
		if _, taken := byMAC[k]; taken || mine[u] || a.busy[k] {
			continue
		}
		fresh[u], byMAC[k] = l, u
	}
	changed := 0
	for u, l := range fresh {
		if cur, ok := a.byIP[u]; !ok || !bytes.Equal(cur.MAC, l.MAC) {
			changed++
		}
	}
	for u := range a.byIP {
		if _, ok := fresh[u]; !ok {
			changed++
			a.pool.pushFreed(u)
		}
	}
	a.byIP, a.byMAC = fresh, byMAC
	return changed, nil
}
