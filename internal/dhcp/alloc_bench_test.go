package dhcp

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// benchAllocator returns an allocator over a /16 (65,022 addresses) with
// leased addresses already leased, the way a big lab looks after a morning
// of boots. A few machines have reservations, as in a real inventory.
func benchAllocator(b *testing.B, leased int) (*allocator, time.Time) {
	b.Helper()
	var res StaticMachines
	for i := range 50 {
		res = append(res, Reservation{MAC: benchMAC(1<<30 + i), IP: net.IPv4(10, 1, 200, byte(i+1)).To4(), Boot: true})
	}
	cfg := &Config{
		ServerIP: net.IPv4(10, 1, 0, 1).To4(), Netmask: net.CIDRMask(16, 32),
		RangeStart: net.IPv4(10, 1, 0, 2).To4(), RangeEnd: net.IPv4(10, 1, 255, 254).To4(),
		LeaseTime: time.Hour, Machines: res,
	}
	a := newAllocator(cfg, NewMemStore())
	ctx, now := context.Background(), time.Unix(1_700_000_000, 0)
	for i := range leased {
		mac := benchMAC(i)
		ip, err := a.offer(mac, nil, now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.commit(ctx, mac, ip, now); err != nil {
			b.Fatal(err)
		}
	}
	return a, now
}

func benchMAC(i int) net.HardwareAddr {
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(mac[2:], uint32(i))
	return mac
}

// BenchmarkOffer measures a DISCOVER from a machine the pool has not seen,
// with 30,000 leases in place. The client then takes another server's
// offer, so the pool does not run dry however long the benchmark runs.
func BenchmarkOffer(b *testing.B) {
	a, now := benchAllocator(b, 30_000)
	i := 0
	for b.Loop() {
		mac := benchMAC(100_000 + i)
		if _, err := a.offer(mac, nil, now); err != nil {
			b.Fatal(err)
		}
		a.forgetOffer(mac)
		i++
	}
}

// BenchmarkDORA measures OFFER plus the lease commit (in memory) for new
// machines, starting from 20,000 leases: offers and leases pile up as in
// the perfdhcp run. The allocator is rebuilt (untimed) before the pool ends.
func BenchmarkDORA(b *testing.B) {
	const start, room = 20_000, 40_000
	a, now := benchAllocator(b, start)
	ctx, n := context.Background(), 0
	for b.Loop() {
		if n == room {
			b.StopTimer()
			a, now = benchAllocator(b, start)
			n = 0
			b.StartTimer()
		}
		mac := benchMAC(100_000 + n)
		ip, err := a.offer(mac, nil, now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.commit(ctx, mac, ip, now); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
