package dhcp

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// A client gives an address back early: RELEASE when it is done with it,
// DECLINE when someone else answers ARP for it.

// release ends mac's lease on ip early (RFC 2131 section 4.4.6). The entry is
// kept, expired, so the machine gets the same address next time.
func (a *allocator) release(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) error {
	k, ok := keyOf(mac)
	if !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.byMAC[k]
	if !ok || ip.To4() == nil || ip2u(ip) != u || a.busy[k] {
		return nil // not its lease, or a REQUEST of it is being committed
	}
	l := a.byIP[u]
	l.Expiry = now
	if err := a.store.Put(ctx, l); err != nil {
		return fmt.Errorf("persist release of %v by %v: %w", ip, mac, err)
	}
	a.byIP[u] = l
	a.touch(u)
	return nil
}

// decline marks ip as in use by some unknown host (the client saw it answer
// ARP) and drops mac's lease on it (RFC 2131 section 4.3.3). The hold is
// saved to Config.HoldFile, outside the lock, so it outlives a restart.
func (a *allocator) decline(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) error {
	if ip.To4() == nil {
		return nil
	}
	gen, holds, err := a.declineLocked(ctx, mac, ip2u(ip), now)
	if holds != nil {
		err = errors.Join(err, a.holds.write(gen, holds))
	}
	return err
}

func (a *allocator) declineLocked(ctx context.Context, mac net.HardwareAddr, u uint32, now time.Time) (uint64, map[uint32]time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	until := now.Add(declineHold)
	old := a.declined[u]
	a.declined[u] = until
	heap.Push(&a.pool.timers, timer{at: until, u: u})
	gen, holds := a.snapshotHolds(u, old, until)
	ip := u2ip(u)
	delete(a.offers, u)
	if k, _ := keyOf(mac); a.busy[k] {
		return gen, holds, nil // a REQUEST of it is being committed; the client declines again
	}
	if l, ok := a.byIP[u]; ok && bytes.Equal(l.MAC, mac) {
		if err := a.store.Delete(ctx, mac); err != nil {
			return gen, holds, fmt.Errorf("drop declined lease %v of %v: %w", ip, mac, err)
		}
		delete(a.byIP, u)
		a.touch(u)
		a.dropMAC(mac)
	}
	return gen, holds, nil
}
