package dhcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"
)

// How long an offered address is held for the client it was offered to, and
// how long an address a client DECLINEd (someone else answers ARP for it) is
// kept out of the pool.
const (
	offerHold   = time.Minute
	declineHold = 10 * time.Minute
)

var (
	// errUnavailable: the address cannot go to this client (taken, reserved
	// for another machine, outside the range). The client gets a NAK.
	errUnavailable = errors.New("address not available to this client")
	// errExhausted: no address left to offer.
	errExhausted = errors.New("address pool exhausted")
)

// allocator decides which address each MAC gets. All methods are safe for
// concurrent use; the store is written before a lease is reported committed.
type allocator struct {
	mu         sync.Mutex
	start, end uint32 // pool, inclusive
	server     uint32
	subnet     *net.IPNet
	leaseTime  time.Duration
	machines   Machines
	store      LeaseStore

	byIP     map[uint32]Lease
	byMAC    map[string]uint32
	offers   map[uint32]heldOffer
	declined map[uint32]time.Time
}

type heldOffer struct {
	mac   string
	until time.Time
}

func newAllocator(cfg *Config, store LeaseStore) *allocator {
	return &allocator{
		start:     ip2u(cfg.RangeStart),
		end:       ip2u(cfg.RangeEnd),
		server:    ip2u(cfg.ServerIP),
		subnet:    &net.IPNet{IP: cfg.ServerIP.Mask(cfg.Netmask), Mask: cfg.Netmask},
		leaseTime: cfg.LeaseTime,
		machines:  cfg.Machines,
		store:     store,
		byIP:      map[uint32]Lease{},
		byMAC:     map[string]uint32{},
		offers:    map[uint32]heldOffer{},
		declined:  map[uint32]time.Time{},
	}
}

// load reads the persisted leases. Two leases on one address cannot come from
// this server, but a hand-edited file could hold them: the later expiry wins.
func (a *allocator) load(ctx context.Context) (int, error) {
	leases, err := a.store.Load(ctx)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range leases {
		ip := l.IP.To4()
		if ip == nil || len(l.MAC) == 0 {
			continue
		}
		u := ip2u(ip)
		if old, ok := a.byIP[u]; ok && old.Expiry.After(l.Expiry) {
			continue
		} else if ok {
			delete(a.byMAC, old.MAC.String())
		}
		a.byIP[u] = l
		a.byMAC[l.MAC.String()] = u
	}
	return len(a.byIP), nil
}

// usable reports whether ip may be given to mac at time now.
func (a *allocator) usable(mac net.HardwareAddr, u uint32, now time.Time) bool {
	ip := u2ip(u)
	if res, _ := a.machines.Lookup(mac); res != nil {
		// A machine with a reservation gets exactly that address, wherever it is.
		if !res.Equal(ip) {
			return false
		}
	} else {
		if u < a.start || u > a.end || u == a.server {
			return false
		}
		if other := a.machines.ReservedFor(ip); other != nil && !bytes.Equal(other, mac) {
			return false
		}
	}
	if l, ok := a.byIP[u]; ok && !bytes.Equal(l.MAC, mac) && now.Before(l.Expiry) {
		return false
	}
	if o, ok := a.offers[u]; ok && o.mac != mac.String() && now.Before(o.until) {
		return false
	}
	if until, ok := a.declined[u]; ok && now.Before(until) {
		return false
	}
	return true
}

// offer picks an address for a DISCOVER and holds it briefly for mac. In
// order of preference: the reservation, the client's current or previous
// lease, the address it asks for, a never-used address, then the address
// whose lease expired longest ago (so returning machines keep theirs).
func (a *allocator) offer(mac net.HardwareAddr, requested net.IP, now time.Time) (net.IP, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pick := func(u uint32) net.IP {
		a.offers[u] = heldOffer{mac: mac.String(), until: now.Add(offerHold)}
		return u2ip(u)
	}
	if res, _ := a.machines.Lookup(mac); res != nil {
		if u := ip2u(res); a.usable(mac, u, now) {
			return pick(u), nil
		}
		return nil, fmt.Errorf("%w: reserved address %v is still leased to %v", errUnavailable, res, a.byIP[ip2u(res)].MAC)
	}
	if u, ok := a.byMAC[mac.String()]; ok && a.usable(mac, u, now) {
		return pick(u), nil
	}
	if requested.To4() != nil {
		if u := ip2u(requested); a.usable(mac, u, now) {
			return pick(u), nil
		}
	}
	var expired []Lease
	for u := a.start; ; u++ {
		if l, ok := a.byIP[u]; !ok {
			if a.usable(mac, u, now) {
				return pick(u), nil
			}
		} else if !now.Before(l.Expiry) {
			expired = append(expired, l)
		}
		if u == a.end { // also stops at 255.255.255.255 without overflow
			break
		}
	}
	sort.Slice(expired, func(i, j int) bool { return expired[i].Expiry.Before(expired[j].Expiry) })
	for _, l := range expired {
		if u := ip2u(l.IP); a.usable(mac, u, now) {
			return pick(u), nil
		}
	}
	return nil, errExhausted
}

// commit leases ip to mac and persists the lease before returning it; only
// then may the caller ACK. errUnavailable means NAK; other errors mean the
// store failed and the client should get no answer (it will retry).
func (a *allocator) commit(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) (Lease, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ip = ip.To4()
	if ip == nil {
		return Lease{}, fmt.Errorf("%w: no IPv4 address requested", errUnavailable)
	}
	u := ip2u(ip)
	if !a.usable(mac, u, now) {
		return Lease{}, fmt.Errorf("%w: %v", errUnavailable, ip)
	}
	l := Lease{MAC: append(net.HardwareAddr(nil), mac...), IP: ip, Expiry: now.Add(a.leaseTime)}
	// An expired lease of another machine on this address goes first, so the
	// store never holds one address twice.
	if old, ok := a.byIP[u]; ok && !bytes.Equal(old.MAC, mac) {
		if err := a.store.Delete(ctx, old.MAC); err != nil {
			return Lease{}, fmt.Errorf("drop expired lease of %v: %w", old.MAC, err)
		}
		delete(a.byMAC, old.MAC.String())
		delete(a.byIP, u)
	}
	if err := a.store.Put(ctx, l); err != nil {
		return Lease{}, fmt.Errorf("persist lease %v for %v: %w", ip, mac, err)
	}
	if prev, ok := a.byMAC[mac.String()]; ok && prev != u {
		delete(a.byIP, prev)
	}
	a.byIP[u] = l
	a.byMAC[mac.String()] = u
	delete(a.offers, u)
	return l, nil
}

// leaseOf returns mac's current lease, if it holds one that has not expired.
func (a *allocator) leaseOf(mac net.HardwareAddr, now time.Time) (Lease, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.byMAC[mac.String()]
	if !ok {
		return Lease{}, false
	}
	l := a.byIP[u]
	return l, now.Before(l.Expiry)
}

// release ends mac's lease on ip early (RFC 2131 section 4.4.6). The entry is
// kept, expired, so the machine gets the same address next time.
func (a *allocator) release(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.byMAC[mac.String()]
	if !ok || ip.To4() == nil || ip2u(ip) != u {
		return nil
	}
	l := a.byIP[u]
	l.Expiry = now
	if err := a.store.Put(ctx, l); err != nil {
		return fmt.Errorf("persist release of %v by %v: %w", ip, mac, err)
	}
	a.byIP[u] = l
	return nil
}

// decline marks ip as in use by some unknown host (the client saw it answer
// ARP) and drops mac's lease on it (RFC 2131 section 4.3.3).
func (a *allocator) decline(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip.To4() == nil {
		return nil
	}
	u := ip2u(ip)
	a.declined[u] = now.Add(declineHold)
	delete(a.offers, u)
	if l, ok := a.byIP[u]; ok && bytes.Equal(l.MAC, mac) {
		if err := a.store.Delete(ctx, mac); err != nil {
			return fmt.Errorf("drop declined lease %v of %v: %w", ip, mac, err)
		}
		delete(a.byIP, u)
		delete(a.byMAC, mac.String())
	}
	return nil
}

// forgetOffer releases the hold on whatever was offered to mac: the client
// chose another server's offer.
func (a *allocator) forgetOffer(mac net.HardwareAddr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, o := range a.offers {
		if o.mac == mac.String() {
			delete(a.offers, u)
		}
	}
}

// gc drops stale offer holds and declines; called periodically by Run.
func (a *allocator) gc(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, o := range a.offers {
		if !now.Before(o.until) {
			delete(a.offers, u)
		}
	}
	for u, t := range a.declined {
		if !now.Before(t) {
			delete(a.declined, u)
		}
	}
}
