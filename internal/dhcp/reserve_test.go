package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// enrolledSet is a Machines where the listed MACs are enrolled and every
// other machine boots as unknown.
type enrolledSet map[string]bool

func (e enrolledSet) Lookup(net.HardwareAddr) (net.IP, bool) { return nil, true }
func (e enrolledSet) ReservedFor(net.IP) net.HardwareAddr    { return nil }
func (e enrolledSet) Enrolled(mac net.HardwareAddr) bool     { return e[mac.String()] }
func floodMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0xde, 0xad, byte(i >> 16), byte(i >> 8), byte(i)}
}
func labMAC(i int) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, byte(i)} }
func reserveAlloc(reserve int, lab enrolledSet) *allocator {
	return newAllocator(&Config{
		ServerIP: net.IPv4(10, 9, 0, 1).To4(), Netmask: net.CIDRMask(24, 32),
		RangeStart: net.IPv4(10, 9, 0, 10).To4(), RangeEnd: net.IPv4(10, 9, 0, 109).To4(), // 100 addresses
		LeaseTime: time.Hour, Machines: lab, Reserve: reserve,
	}, NewMemStore())
}

// TestReserveForEnrolled: 5000 DISCOVERs from random MACs take at most the
// addresses outside the reserve (90 of 100 by default), are refused with
// errReserved after that, and the lab's ten enrolled machines still get
// an address each, also after leases were committed.
func TestReserveForEnrolled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserve  int
		floodGot int // addresses the flood can hold
		labGot   int // enrolled machines served after the flood
	}{
		{"default: a tenth", 0, 90, 10},
		{"explicit 20", 20, 80, 10},
		{"none: the flood takes everything", -1, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := enrolledSet{}
			for i := range 10 {
				lab[labMAC(i).String()] = true
			}
			a := reserveAlloc(tc.reserve, lab)
			now := time.Unix(1_700_000_000, 0)
			got, refused := 0, 0
			for i := range 5000 {
				_, err := a.offer(floodMAC(i), nil, now)
				switch {
				case err == nil:
					got++
				case errors.Is(err, errReserved), errors.Is(err, errExhausted):
					refused++
				default:
					t.Fatalf("flood DISCOVER %d: %v", i, err)
				}
				now = now.Add(time.Millisecond) // 1000 a second, inside the offer hold
			}
			if got != tc.floodGot {
				t.Errorf("the flood got %d addresses, want %d", got, tc.floodGot)
			}
			served := 0
			for i := range 10 {
				ip, err := a.offer(labMAC(i), nil, now)
				if err != nil {
					continue
				}
				if _, err := a.commit(context.Background(), labMAC(i), ip, now); err != nil {
					t.Fatalf("commit for enrolled %v: %v", labMAC(i), err)
				}
				served++
			}
			if served != tc.labGot {
				t.Errorf("%d of 10 enrolled machines got an address during the flood, want %d", served, tc.labGot)
			}
		})
	}
}

// TestReserveCountsExpiry: once the flood's offers expire, the addresses
// are free again for anyone.
func TestReserveCountsExpiry(t *testing.T) {
	a := reserveAlloc(0, enrolledSet{})
	now := time.Unix(1_700_000_000, 0)
	for i := range 200 {
		a.offer(floodMAC(i), nil, now)
	}
	if _, err := a.offer(floodMAC(999), nil, now); !errors.Is(err, errReserved) {
		t.Fatalf("with 90 offers held: %v, want errReserved", err)
	}
	later := now.Add(offerHold + time.Second)
	for i := range 90 {
		if _, err := a.offer(floodMAC(1000+i), nil, later); err != nil {
			t.Fatalf("after the offers expired, DISCOVER %d: %v", i, err)
		}
	}
	if n := a.countFree(later); n != 10 {
		t.Errorf("countFree = %d, want 10", n)
	}
}

func ExampleEnrolled() {
	var m Machines = enrolledSet{"52:54:00:00:00:01": true}
	e, ok := m.(Enrolled)
	fmt.Println(ok, e.Enrolled(labMAC(1)), e.Enrolled(floodMAC(1)))
	// Output: true true false
}
