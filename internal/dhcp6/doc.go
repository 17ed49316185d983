// Package dhcp6 is bootfleet's DHCPv6 server (RFC 8415) for network boot
// over IPv6: it leases addresses from a configured range (IA_NA) and tells
// boot firmware what to load with the boot file URL option 59 (RFC 5970),
// a tftp:// URL for PXEv6 and an http:// URL, with vendor class
// "HTTPClient", for UEFI HTTP boot over IPv6; iPXE gets its script URL.
//
// Firmware is recognised by package pxe (Detect6) and the boot plan is
// the DHCPv4 server's (pxe.PlanFor) with an IPv6 base URL. The policy
// (policy.go, alloc.go) touches no socket; server.go reads and answers,
// socket_linux.go opens the socket. Leases are keyed by the client's DUID
// and, given a [LeaseStore] (leasestore.go; the inventory in a serving
// bootfleet), written before the Reply that grants them and read back at
// start, so a restarted server gives a returning client its address and
// never gives it to another.
//
// In proxy mode (proxy.go) another DHCPv6 server hands out the addresses
// and this one answers boot firmware only, never with an IA_NA, on port
// 547 and on BootServicePort, where EDK II asks a proxy for its boot file.
package dhcp6
