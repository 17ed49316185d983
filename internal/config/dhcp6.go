package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// DHCP6 configures the DHCPv6 server, for network boot over IPv6.
type DHCP6 struct {
	// Mode is full (lease addresses from Range and send boot file URLs),
	// proxy (beside the site's DHCPv6 server, which hands out the
	// addresses: answer boot firmware only, with boot file URLs and never
	// an address, also on UDP 4011) or off (default).
	Mode string `yaml:"mode"`
	// Range is the pool, "first-last" of one /64, at most 65536
	// addresses, e.g. fd00:213::100-fd00:213::1ff. Router advertisements
	// then announce its /64 as on-link, with DHCPv6 managed (M) set.
	Range string `yaml:"range"`
	// Lease is the lease time. Default 1h, at least 1m.
	Lease Duration `yaml:"lease"`
}

// ParseRange returns the first and last address of dhcp6.range.
func (d DHCP6) ParseRange() (first, last netip.Addr, err error) {
	a, b, ok := strings.Cut(d.Range, "-")
	if !ok {
		return first, last, fmt.Errorf("want first-last, e.g. fd00:213::100-fd00:213::1ff, got %q", d.Range)
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(a))
	last, err2 := netip.ParseAddr(strings.TrimSpace(b))
	switch {
	case err1 != nil || err2 != nil || !first.Is6() || !last.Is6() || first.Is4In6() || last.Is4In6():
		return first, last, fmt.Errorf("want two IPv6 addresses, got %q", d.Range)
	case last.Less(first):
		return first, last, fmt.Errorf("first address %s is after last %s", first, last)
	case netip.PrefixFrom(first, 64).Masked() != netip.PrefixFrom(last, 64).Masked():
		return first, last, fmt.Errorf("%s and %s are not in one /64", first, last)
	}
	return first, last, nil
}
