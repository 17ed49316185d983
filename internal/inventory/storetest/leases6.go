package storetest

import (
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// duid is a DUID-LL (type 3, hardware type 1) for the MAC m.
func duid(m string) []byte { return append([]byte{0, 3, 0, 1}, mac(m)...) }

// testLeases6: DHCPv6 leases keep the IPv4 rules (one address per client,
// one client per address, numeric order, durable), keyed by DUID, beside
// the IPv4 lease of the same machine.
func testLeases6(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	exp := time.Date(2026, 5, 1, 10, 0, 0, 987654321, time.UTC)
	put := func(d []byte, m net.HardwareAddr, ip string) error {
		return s.PutLease6(c, inventory.Lease6{DUID: d, MAC: m, IP: net.ParseIP(ip), Expiry: exp})
	}
	uuid := append([]byte{0, 4}, []byte("0123456789abcdef")...) // DUID-UUID: no MAC
	for _, l := range []struct {
		d  []byte
		m  net.HardwareAddr
		ip string
	}{{duid("52:54:00:00:00:01"), mac("52:54:00:00:00:01"), "fd00:213::100"},
		{duid("52:54:00:00:00:02"), mac("52:54:00:00:00:02"), "fd00:213::20"},
		{uuid, nil, "fd00:213::3"}} {
		if err := put(l.d, l.m, l.ip); err != nil {
			t.Fatal(err)
		}
	}
	// The same machine holds an IPv4 lease too.
	if err := s.PutLease(c, inventory.Lease{MAC: mac("52:54:00:00:00:01"), IP: net.IPv4(10, 0, 0, 5), Expiry: exp}); err != nil {
		t.Fatalf("an IPv4 lease beside the machine's IPv6 one: %v", err)
	}
	list := must[[]inventory.Lease6](t)(s.ListLeases6(c))
	if len(list) != 3 || list[0].IP.String() != "fd00:213::3" || list[1].IP.String() != "fd00:213::20" || list[2].IP.String() != "fd00:213::100" {
		t.Fatalf("ListLeases6 = %v, want ordered by address numerically", list)
	}
	if !reflect.DeepEqual(list[0].DUID, uuid) || list[0].MAC != nil || list[2].MAC.String() != "52:54:00:00:00:01" {
		t.Fatalf("ListLeases6 = %+v, want the DUIDs as stored and a MAC only where given", list)
	}
	if !list[0].Expiry.Equal(exp.Truncate(time.Microsecond)) {
		t.Fatalf("expiry read back as %v, want %v", list[0].Expiry, exp)
	}
	// A client moving to another address replaces its lease; an address
	// held by another client is refused until that lease goes.
	if err := put(duid("52:54:00:00:00:01"), mac("52:54:00:00:00:01"), "fd00:213::101"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, put(duid("52:54:00:00:00:04"), nil, "fd00:213::20"), inventory.ErrConflict, "ip")
	// The same address written another way is the same address.
	wantErr(t, put(duid("52:54:00:00:00:04"), nil, "fd00:213:0:0:0:0:0:20"), inventory.ErrConflict, "ip")
	if err := s.DeleteLease6(c, duid("52:54:00:00:00:02")); err != nil {
		t.Fatal(err)
	}
	if err := put(duid("52:54:00:00:00:04"), nil, "fd00:213::20"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLease6(c, duid("52:54:00:00:00:99")); err != nil {
		t.Fatalf("deleting a missing lease: %v, want nil", err)
	}
	d5 := duid("52:54:00:00:00:05")
	wantErr(t, put(d5, nil, "10.0.0.9"), inventory.ErrInvalid, "ip")
	wantErr(t, put(nil, nil, "fd00::9"), inventory.ErrInvalid, "duid")
	wantErr(t, put(make([]byte, inventory.MaxDUID+1), nil, "fd00::9"), inventory.ErrInvalid, "duid")
	wantErr(t, put(d5, net.HardwareAddr{1, 2, 3}, "fd00::9"), inventory.ErrInvalid, "mac")
	wantErr(t, s.PutLease6(c, inventory.Lease6{DUID: d5, IP: net.ParseIP("fd00::9")}), inventory.ErrInvalid, "expiry")

	s = b.Reopen(t, s)
	want := "fd00:213::3=000430313233343536373839616263646566/ fd00:213::20=00030001525400000004/ fd00:213::101=00030001525400000001/52:54:00:00:00:01"
	var got []string
	for _, l := range must[[]inventory.Lease6](t)(s.ListLeases6(c)) {
		got = append(got, fmt.Sprintf("%s=%x/%s", l.IP, l.DUID, l.MAC))
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("after a reopen, leases6 = %v, want %s", got, want)
	}
	if l := must[[]inventory.Lease](t)(s.ListLeases(c)); len(l) != 1 || l[0].IP.String() != "10.0.0.5" {
		t.Fatalf("IPv4 leases = %v, want the one lease of 10.0.0.5 untouched by the IPv6 ones", l)
	}
}

// testLease6Race: many clients fight over few addresses; no address ends
// up with two DUIDs and each was granted once.
func testLease6Race(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	won := fight(t, func(w, a int) error {
		return s.PutLease6(c, inventory.Lease6{DUID: duid(fmt.Sprintf("52:54:00:00:%02x:%02x", w, a)),
			IP: net.ParseIP(fmt.Sprintf("fd00:213::%x", a)), Expiry: time.Now().Add(time.Hour)})
	})
	seen := map[string]string{}
	for _, l := range must[[]inventory.Lease6](t)(s.ListLeases6(c)) {
		if other, dup := seen[l.IP.String()]; dup {
			t.Fatalf("address %s belongs to %s and %x", l.IP, other, l.DUID)
		}
		seen[l.IP.String()] = fmt.Sprintf("%x", l.DUID)
	}
	for a, n := range won {
		if n != 1 {
			t.Fatalf("address fd00:213::%x was granted %d times, want once", a, n)
		}
	}
}
