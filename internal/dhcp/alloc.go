package dhcp

import (
	"bytes"
	"container/heap"
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
	// errReserved: the free addresses left are kept for enrolled machines
	// and this client is not one; the DISCOVER is dropped.
	errReserved = errors.New("address pool down to its reserve for enrolled machines")
	// errBusy: a lease write for this client (or for the expired lease it
	// replaces) is in flight; the packet is dropped and the client retries.
	errBusy = errors.New("a lease write for this client is in flight")
)

// allocator decides which address each MAC gets. All methods are safe for
// concurrent use; the store is written before a lease is reported committed.
// The lock is not held while commit writes the store: the address is marked
// committing meanwhile, so concurrent REQUESTs share one group commit.
type allocator struct {
	mu         sync.Mutex
	start, end uint32 // pool, inclusive
	server     uint32
	subnet     *net.IPNet
	leaseTime  time.Duration
	machines   Machines
	store      LeaseStore
	batch      *groupCommit // nil when the store cannot batch

	byIP     map[uint32]Lease
	byMAC    map[macKey]uint32
	offers   map[uint32]heldOffer
	offerOf  map[macKey]uint32 // the address held for a MAC; check offers, it may be stale
	declined map[uint32]time.Time
	holds    *holdWriter // nil: decline holds live in memory only
	holdGen  uint64      // snapshots of declined taken, for holds
	pool     pool
	reserve  reserve

	committing map[uint32]macKey // addresses being written to the store, for whom
	busy       map[macKey]bool   // MACs whose lease is being written or deleted

	// Other servers write the same store (shared.go): gen counts this
	// server's changes to byIP, touched says which change last touched
	// each address while shared, and kick asks for a refresh.
	shared  bool
	gen     uint64
	touched map[uint32]uint64
	kick    chan struct{}
}

type heldOffer struct {
	mac   macKey
	until time.Time
}

// macKey is a client MAC as a map key: fixed size, so lookups neither format
// nor allocate. DHCP clients here are Ethernet (validate insists on 6 bytes).
type macKey [6]byte

// keyOf returns mac's key; ok is false for a MAC that is not 6 bytes long
// (only a hand-edited lease store holds one; such a client is never served).
func keyOf(mac net.HardwareAddr) (k macKey, ok bool) {
	if len(mac) != len(k) {
		return k, false
	}
	return macKey(mac), true
}

func newAllocator(cfg *Config, store LeaseStore) *allocator {
	var batch *groupCommit
	if bs, ok := store.(BatchStore); ok {
		batch = &groupCommit{store: bs}
	}
	var holds *holdWriter
	if cfg.HoldFile != "" {
		holds = &holdWriter{path: cfg.HoldFile}
	}
	return &allocator{
		holds:      holds,
		batch:      batch,
		committing: map[uint32]macKey{},
		busy:       map[macKey]bool{},
		start:      ip2u(cfg.RangeStart),
		end:        ip2u(cfg.RangeEnd),
		server:     ip2u(cfg.ServerIP),
		subnet:     &net.IPNet{IP: cfg.ServerIP.Mask(cfg.Netmask), Mask: cfg.Netmask},
		leaseTime:  cfg.LeaseTime,
		machines:   cfg.Machines,
		store:      store,
		pool:       newPool(ip2u(cfg.RangeStart), ip2u(cfg.RangeEnd)),
		touched:    map[uint32]uint64{},
		kick:       make(chan struct{}, 1),
		byIP:       map[uint32]Lease{},
		byMAC:      map[macKey]uint32{},
		offers:     map[uint32]heldOffer{},
		offerOf:    map[macKey]uint32{},
		declined:   map[uint32]time.Time{},
		reserve:    reserve{keep: reserveFor(cfg)},
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
			a.dropMAC(old.MAC)
		}
		a.byIP[u] = l
		if k, ok := keyOf(l.MAC); ok {
			a.byMAC[k] = u
		}
	}
	return len(a.byIP), nil
}

// dropMAC removes mac from the by-MAC index.
func (a *allocator) dropMAC(mac net.HardwareAddr) {
	if k, ok := keyOf(mac); ok {
		delete(a.byMAC, k)
	}
}

// usable reports whether address u may be given to mac (key k) at time now.
// res is mac's reservation (nil for none), looked up once by the caller:
// the inventory lookup is the same for every candidate address.
func (a *allocator) usable(mac net.HardwareAddr, k macKey, res net.IP, u uint32, now time.Time) bool {
	if res != nil {
		// A machine with a reservation gets exactly that address, wherever it is.
		if res.To4() == nil || ip2u(res) != u {
			return false
		}
	} else {
		if u < a.start || u > a.end || u == a.server {
			return false
		}
		if other := a.machines.ReservedFor(u2ip(u)); other != nil && !bytes.Equal(other, mac) {
			return false
		}
	}
	if l, ok := a.byIP[u]; ok && !bytes.Equal(l.MAC, mac) && now.Before(l.Expiry) {
		return false
	}
	if c, ok := a.committing[u]; ok && c != k {
		return false
	}
	return a.offerFree(k, u, now) && !a.isDeclined(u, now)
}

// offerFree reports whether u is held for no MAC but k.
func (a *allocator) offerFree(k macKey, u uint32, now time.Time) bool {
	o, ok := a.offers[u]
	return !ok || o.mac == k || !now.Before(o.until)
}

func (a *allocator) isDeclined(u uint32, now time.Time) bool {
	until, ok := a.declined[u]
	return ok && now.Before(until)
}

// hold reserves u for k for offerHold and drops any other hold of k: a
// client answers one offer, and an address held twice only shrinks the pool.
func (a *allocator) hold(k macKey, u uint32, now time.Time) {
	if v, ok := a.offerOf[k]; ok && v != u {
		a.dropHold(k)
	}
	until := now.Add(offerHold)
	a.offers[u] = heldOffer{mac: k, until: until}
	a.offerOf[k] = u
	heap.Push(&a.pool.timers, timer{at: until, u: u})
}

// dropHold releases k's hold, if it has one.
func (a *allocator) dropHold(k macKey) {
	v, ok := a.offerOf[k]
	if !ok {
		return
	}
	delete(a.offerOf, k)
	if o, ok := a.offers[v]; ok && o.mac == k {
		delete(a.offers, v)
		a.pool.pushFreed(v)
	}
}

// offer picks an address for a DISCOVER and holds it briefly for mac. In
// order of preference: the reservation, the client's current or previous
// lease, the address it asks for, a never-used address, then the address
// whose lease expired longest ago (so returning machines keep theirs).
func (a *allocator) offer(mac net.HardwareAddr, requested net.IP, now time.Time) (net.IP, error) {
	k, ok := keyOf(mac)
	if !ok {
		return nil, fmt.Errorf("%w: MAC %v is not 6 bytes", errUnavailable, mac)
	}
	res, _ := a.machines.Lookup(mac) // outside the lock: it is an in-memory view
	a.mu.Lock()
	defer a.mu.Unlock()
	pick := func(u uint32) net.IP {
		a.hold(k, u, now)
		return u2ip(u)
	}
	if res != nil {
		if res.To4() == nil {
			return nil, fmt.Errorf("%w: reserved address %v is not IPv4", errUnavailable, res)
		}
		if u := ip2u(res); a.usable(mac, k, res, u, now) {
			return pick(u), nil
		}
		return nil, fmt.Errorf("%w: reserved address %v is still leased to %v", errUnavailable, res, a.byIP[ip2u(res)].MAC)
	}
	if u, ok := a.byMAC[k]; ok && a.usable(mac, k, nil, u, now) {
		return pick(u), nil
	}
	if requested.To4() != nil {
		if u := ip2u(requested); a.usable(mac, k, nil, u, now) {
			return pick(u), nil
		}
	}
	// A retransmitted DISCOVER gets the address already held for it.
	if u, ok := a.offerOf[k]; ok && a.offers[u].mac == k && a.usable(mac, k, nil, u, now) {
		return pick(u), nil
	}
	if err := a.allowFresh(mac, now); err != nil {
		return nil, err
	}
	if u, ok := a.fastFree(mac, k, now); ok {
		a.tookFresh()
		return pick(u), nil
	}
	u, err := a.offerScan(mac, k, now)
	if err != nil {
		return nil, err
	}
	a.tookFresh()
	return pick(u), nil
}

// offerScan is the slow path, for when no never-leased address is known to
// be free: it looks at the whole range, as the fast path may have missed an
// address (a reservation removed), then takes the address whose lease
// expired longest ago.
func (a *allocator) offerScan(mac net.HardwareAddr, k macKey, now time.Time) (uint32, error) {
	var expired []Lease
	for n := range a.pool.size() {
		u := a.pool.addr(n)
		if l, ok := a.byIP[u]; !ok {
			if a.usable(mac, k, nil, u, now) {
				return u, nil
			}
		} else if !now.Before(l.Expiry) {
			expired = append(expired, l)
		}
	}
	sort.Slice(expired, func(i, j int) bool { return expired[i].Expiry.Before(expired[j].Expiry) })
	for _, l := range expired {
		if u := ip2u(l.IP); a.usable(mac, k, nil, u, now) {
			return u, nil
		}
	}
	return 0, errExhausted
}

// commit leases ip to mac and persists the lease before returning it; only
// then may the caller ACK. errUnavailable means NAK; errBusy and other
// errors mean no answer (the client retries).
//
// The store is written without the lock, so that concurrent commits can
// share one fsync (groupCommit). Meanwhile the address is marked committing
// (no one else may have it) and the MACs involved busy (no second write for
// them can overtake this one).
func (a *allocator) commit(ctx context.Context, mac net.HardwareAddr, ip net.IP, now time.Time) (Lease, error) {
	ip = ip.To4()
	if ip == nil {
		return Lease{}, fmt.Errorf("%w: no IPv4 address requested", errUnavailable)
	}
	k, ok := keyOf(mac)
	if !ok {
		return Lease{}, fmt.Errorf("%w: MAC %v is not 6 bytes", errUnavailable, mac)
	}
	res, _ := a.machines.Lookup(mac)
	u := ip2u(ip)
	l := Lease{MAC: append(net.HardwareAddr(nil), mac...), IP: ip, Expiry: now.Add(a.leaseTime)}

	a.mu.Lock()
	if !a.usable(mac, k, res, u, now) {
		a.mu.Unlock()
		return Lease{}, fmt.Errorf("%w: %v", errUnavailable, ip)
	}
	if a.busy[k] {
		a.mu.Unlock()
		return Lease{}, errBusy
	}
	// An expired lease of another machine on this address is replaced in
	// the same write (Lease.Replaces), so the store never holds one
	// address twice.
	old, replace := a.byIP[u]
	replace = replace && !bytes.Equal(old.MAC, mac)
	oldKey, oldKeyed := keyOf(old.MAC)
	if replace && oldKeyed {
		if a.busy[oldKey] {
			a.mu.Unlock()
			return Lease{}, errBusy
		}
		a.busy[oldKey] = true
	}
	a.busy[k] = true
	a.committing[u] = k
	a.mu.Unlock()

	w := l
	if replace {
		was := old
		w.Replaces = &was
	}
	err := a.put(ctx, w)
	var taken *TakenError
	if err != nil && !errors.As(err, &taken) {
		err = fmt.Errorf("persist lease %v for %v: %w", ip, mac, err)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.committing, u)
	delete(a.busy, k)
	if replace && oldKeyed {
		delete(a.busy, oldKey)
	}
	if taken != nil {
		// Another server leased the address since this one last read the
		// store. A NAK (RFC 2131 section 4.3.2) sends the client back to
		// DISCOVER, where it gets an address this server now knows is
		// free; staying silent would leave it repeating this REQUEST for
		// up to a minute first.
		a.learn(taken.Holder)
		a.kickRefresh()
		return Lease{}, fmt.Errorf("%w: %v", errUnavailable, taken)
	}
	if err != nil {
		if _, leased := a.byIP[u]; !leased {
			a.pool.pushFreed(u)
		}
		return Lease{}, err
	}
	// The store dropped the expired lease this one replaced.
	if replace && oldKeyed && a.byMAC[oldKey] == u {
		delete(a.byMAC, oldKey)
	}
	if prev, ok := a.byMAC[k]; ok && prev != u {
		delete(a.byIP, prev)
		a.touch(prev)
		a.pool.pushFreed(prev)
	}
	a.byIP[u] = l
	a.byMAC[k] = u
	a.touch(u)
	delete(a.offers, u) // first, so that dropHold does not free u
	a.dropHold(k)
	return l, nil
}

// put writes l durably, with a group commit when the store can batch.
func (a *allocator) put(ctx context.Context, l Lease) error {
	if a.batch != nil {
		return a.batch.put(ctx, l)
	}
	return a.store.Put(ctx, l)
}

// leaseOf returns mac's current lease, if it holds one that has not expired.
func (a *allocator) leaseOf(mac net.HardwareAddr, now time.Time) (Lease, bool) {
	k, ok := keyOf(mac)
	if !ok {
		return Lease{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.byMAC[k]
	if !ok {
		return Lease{}, false
	}
	l := a.byIP[u]
	return l, now.Before(l.Expiry)
}

// forgetOffer releases the hold on whatever was offered to mac: the client
// chose another server's offer.
func (a *allocator) forgetOffer(mac net.HardwareAddr) {
	k, ok := keyOf(mac)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropHold(k)
}

// gc drops stale offer holds and declines; called periodically by Run.
func (a *allocator) gc(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, o := range a.offers {
		if !now.Before(o.until) {
			delete(a.offers, u)
			if a.offerOf[o.mac] == u {
				delete(a.offerOf, o.mac)
			}
		}
	}
	for k, u := range a.offerOf {
		if a.offers[u].mac != k {
			delete(a.offerOf, k)
		}
	}
	for u, t := range a.declined {
		if !now.Before(t) {
			delete(a.declined, u)
		}
	}
	a.pool.expire(now)
	a.pool.unpark()
}
