package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testLeaseTakeover: a lease takes over another MAC's expired lease on
// its address only when that lease is still the one the writer saw, and
// a refused write names the lease that holds the address.
func testLeaseTakeover(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	expired := time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.UTC)
	later := expired.Add(time.Hour)
	m1, m2, m9 := mac("52:54:00:00:01:01"), mac("52:54:00:00:01:02"), mac("52:54:00:00:01:09")
	x := net.IPv4(10, 0, 2, 1).To4()
	if err := s.PutLease(c, inventory.Lease{MAC: m1, IP: x, Expiry: expired}); err != nil {
		t.Fatal(err)
	}
	// What the writer saw of the lease on x, as it read it from the store.
	seen := &inventory.Lease{MAC: m1, IP: x, Expiry: expired.Truncate(time.Microsecond)}
	tests := []struct {
		name     string
		replaces *inventory.Lease
	}{
		{"no takeover named", nil},
		{"another MAC named", &inventory.Lease{MAC: m9, IP: x, Expiry: expired}},
		{"renewed since it was seen", &inventory.Lease{MAC: m1, IP: x, Expiry: expired.Add(-time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.PutLease(c, inventory.Lease{MAC: m2, IP: x, Expiry: later, Replaces: tt.replaces})
			wantErr(t, err, inventory.ErrConflict, "ip")
			var taken *inventory.LeaseTaken
			if !errors.As(err, &taken) || !bytes.Equal(taken.Holder.MAC, m1) || !taken.Holder.IP.Equal(x) || !taken.Holder.Expiry.Equal(seen.Expiry) {
				t.Fatalf("error %v (%T), want an *inventory.LeaseTaken naming %s's lease on %s until %v", err, err, m1, x, seen.Expiry)
			}
		})
	}
	if err := s.PutLease(c, inventory.Lease{MAC: m2, IP: x, Expiry: later, Replaces: seen}); err != nil {
		t.Fatalf("taking over the expired lease as seen: %v", err)
	}
	if got, want := leaseMap(t, c, s), map[string]string{m2.String(): x.String()}; !maps(got, want) {
		t.Fatalf("after the takeover leases = %v, want %v", got, want)
	}
	// In a batch, a takeover and a refusal are each the lease's own outcome.
	lb := s.(inventory.LeaseBatcher)
	y := net.IPv4(10, 0, 2, 2).To4()
	if err := s.PutLease(c, inventory.Lease{MAC: m1, IP: y, Expiry: expired}); err != nil {
		t.Fatal(err)
	}
	errs, err := lb.PutLeases(c, []inventory.Lease{
		{MAC: m9, IP: x, Expiry: later, Replaces: seen}, // m2 holds x now
		{MAC: m9, IP: y, Expiry: later, Replaces: &inventory.Lease{MAC: m1, IP: y, Expiry: expired}},
	})
	if err != nil || !errors.Is(errs[0], inventory.ErrConflict) || errs[1] != nil {
		t.Fatalf("PutLeases = %v, %v; want a conflict for x and the takeover of y", errs, err)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testLeaseBatchRace has batches, as DHCP servers sharing the store
// commit them, fight over fresh addresses in each round: each lease is
// written or refused on its own, never the batch; no address ends up
// with two MACs; and each expired lease is taken over exactly once.
func testLeaseBatchRace(t *testing.T, b Backend) {
	s := b.New(t)
	lb := s.(inventory.LeaseBatcher)
	c := ctx(t)
	const writers, addrs, rounds = 6, 8, 6
	old := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	ipOf := func(r, a int) net.IP { return net.IPv4(10, 0, byte(3+r), byte(a)).To4() }
	oldMAC := func(r, a int) net.HardwareAddr { return mac(fmt.Sprintf("52:54:00:0f:%02x:%02x", r, a)) }
	took := map[string]int{} // takeovers of each expired lease
	for r := range rounds {
		for a := 0; a < addrs; a += 2 { // every other address starts with an expired lease
			if err := s.PutLease(c, inventory.Lease{MAC: oldMAC(r, a), IP: ipOf(r, a), Expiry: old}); err != nil {
				t.Fatal(err)
			}
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			start = make(chan struct{})
		)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := make([]inventory.Lease, 0, addrs)
				for a := range addrs {
					l := inventory.Lease{MAC: mac(fmt.Sprintf("52:54:00:%02x:%02x:%02x", w, r, a)), IP: ipOf(r, a), Expiry: time.Now().Add(time.Hour)}
					if a%2 == 0 {
						l.Replaces = &inventory.Lease{MAC: oldMAC(r, a), IP: l.IP, Expiry: old}
					}
					batch = append(batch, l)
				}
				// Ordered by address, as DHCP's group commit orders them,
				// so two batches take their row locks in the same order.
				slices.SortFunc(batch, func(x, y inventory.Lease) int { return bytes.Compare(x.IP, y.IP) })
				<-start
				errs, err := lb.PutLeases(c, batch)
				if err != nil {
					t.Errorf("writer %d round %d: the batch failed: %v; a lost race must fail only its lease", w, r, err)
					return
				}
				for i, e := range errs {
					if e != nil && !errors.Is(e, inventory.ErrConflict) {
						t.Errorf("writer %d lease %v: %v, want nil or a conflict", w, batch[i].IP, e)
					}
					if e == nil && batch[i].Replaces != nil {
						mu.Lock()
						took[batch[i].IP.String()]++
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	seen := map[string]string{}
	for _, l := range must[[]inventory.Lease](t)(s.ListLeases(c)) {
		if other, dup := seen[l.IP.String()]; dup {
			t.Fatalf("address %s belongs to %s and %s", l.IP, other, l.MAC)
		}
		seen[l.IP.String()] = l.MAC.String()
		if bytes.Equal(l.MAC[:4], mac("52:54:00:0f:00:00")[:4]) {
			t.Fatalf("the expired lease of %s on %s is still there after the fight", l.MAC, l.IP)
		}
	}
	if len(seen) != rounds*addrs {
		t.Fatalf("%d addresses leased after the fight, want all %d", len(seen), rounds*addrs)
	}
	if len(took) != rounds*addrs/2 {
		t.Fatalf("%d expired leases taken over, want all %d: %v", len(took), rounds*addrs/2, took)
	}
	for ip, n := range took {
		if n != 1 {
			t.Fatalf("the expired lease on %s was taken over %d times, want once", ip, n)
		}
	}
}
