package dhcplb

import (
	"net"
	"time"
)

// Scope is the address a server answering DHCP registers beside its
// others, e.g. dhcp-full://10.213.0.0/24: the mode and the LAN. Servers
// registering the same scope share the buckets; a server of the fleet
// without it (DHCP off, another LAN, another mode) owns none here.
func Scope(mode string, ip net.IP, mask net.IPMask) string {
	n := net.IPNet{IP: ip.Mask(mask), Mask: mask}
	return "dhcp-" + mode + "://" + n.String()
}

// DefaultWait is the secs value from which another server also answers
// a client, as ISC dhcpd's "load balance max seconds" default: RFC 2131
// has a client send its second DISCOVER 4 s (randomised by ±1 s) after
// the first, so a client showing 3 s has sent at least twice and its
// server did not get it what it needed; a client served at once never
// gets there.
const DefaultWait = 3 * time.Second
