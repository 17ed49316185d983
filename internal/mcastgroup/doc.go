// Package mcastgroup chooses the multicast group a content is sent to:
// one address per content, the same on every server and at every start,
// drawn from a configured space that is 239.0.0.0/8 by default.
//
// 239.0.0.0/8 is the administratively scoped block (RFC 2365): groups an
// organisation uses inside its own network, which routers at its edge do
// not forward. A space outside it is refused unless the admin asks for it
// explicitly, since a group in the globally scoped blocks may collide with
// a service someone else runs.
//
// Within the space, a group is never one whose Ethernet address (the low
// 23 bits of the group in 01:00:5e:xx:xx:xx, RFC 1112 section 6.4) is
// that of the local network control block 224.0.0.0/24: switches flood
// those frames to every port whatever IGMP snooping learned (RFC 4541
// section 2.1.2), so a storm's traffic would reach every machine on the
// segment. The well-known SSDP and SLP groups are skipped too.
//
// The package is pure: no sockets, no I/O.
package mcastgroup
