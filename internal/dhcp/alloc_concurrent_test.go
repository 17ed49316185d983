package dhcp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowBatchStore is a BatchStore whose commits take a while, so that
// concurrent commits pile up into group commits; every n-th batch fails.
type slowBatchStore struct {
	LeaseStore
	batches, biggest atomic.Int64
	failEvery        int64
}

func (s *slowBatchStore) PutBatch(ctx context.Context, ls []Lease) []error {
	n := s.batches.Add(1)
	if int64(len(ls)) > s.biggest.Load() {
		s.biggest.Store(int64(len(ls)))
	}
	time.Sleep(2 * time.Millisecond)
	errs := make([]error, len(ls))
	for i, l := range ls {
		if s.failEvery > 0 && n%s.failEvery == 0 {
			errs[i] = errors.New("disk full")
			continue
		}
		errs[i] = s.Put(ctx, l)
	}
	return errs
}

// TestConcurrentCommits runs many DORA exchanges at once, some clients
// retransmitting and racing each other for the same address, against a
// store that is slow and sometimes fails. No address may end up leased to
// two MACs, in memory or in the store, and every ACKed lease is stored.
func TestConcurrentCommits(t *testing.T) {
	store := &slowBatchStore{LeaseStore: NewMemStore(), failEvery: 7}
	cfg := &Config{
		ServerIP: net.IPv4(10, 0, 0, 1).To4(), Netmask: net.CIDRMask(24, 32),
		RangeStart: net.IPv4(10, 0, 0, 10).To4(), RangeEnd: net.IPv4(10, 0, 0, 200).To4(),
		LeaseTime: time.Hour, Machines: StaticMachines{},
	}
	a := newAllocator(cfg, store)
	ctx, now := context.Background(), time.Unix(1_700_000_000, 0)

	const clients = 150
	var wg sync.WaitGroup
	acked := make([]net.IP, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := benchMAC(i)
			for try := 0; try < 20 && acked[i] == nil; try++ {
				ip, err := a.offer(mac, nil, now)
				if err != nil {
					continue
				}
				if i%10 == 0 { // a greedy client also asks for its neighbour's address
					a.commit(ctx, mac, net.IPv4(10, 0, 0, byte(10+i/2)), now)
				}
				var inner sync.WaitGroup
				var got atomic.Pointer[Lease]
				for range 2 { // a retransmitted REQUEST
					inner.Add(1)
					go func() {
						defer inner.Done()
						if l, err := a.commit(ctx, mac, ip, now); err == nil {
							got.Store(&l)
						}
					}()
				}
				inner.Wait()
				if l := got.Load(); l != nil {
					acked[i] = l.IP
				}
			}
		}()
	}
	wg.Wait()

	stored, _ := store.Load(ctx)
	byIP := map[string]string{}
	for _, l := range stored {
		if other, dup := byIP[l.IP.String()]; dup {
			t.Fatalf("store: %v leased to %s and %s", l.IP, other, l.MAC)
		}
		byIP[l.IP.String()] = l.MAC.String()
	}
	for i, ip := range acked {
		if ip == nil {
			t.Errorf("client %d never got a lease", i)
			continue
		}
		mac := benchMAC(i).String()
		if l, ok := a.leaseOf(benchMAC(i), now); !ok || !l.IP.Equal(ip) && byIP[l.IP.String()] != mac {
			t.Errorf("client %d: allocator says %+v, store %v", i, l, byIP)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, l := range a.byIP {
		if got := byIP[u2ip(u).String()]; got != l.MAC.String() {
			t.Errorf("%v: allocator has %v, store has %q", u2ip(u), l.MAC, got)
		}
	}
	if len(a.committing) != 0 || len(a.busy) != 0 {
		t.Errorf("left marked: committing %v busy %v", a.committing, a.busy)
	}
	t.Logf("%d batches, biggest %d", store.batches.Load(), store.biggest.Load())
}
