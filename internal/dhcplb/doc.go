// Package dhcplb decides which of several bootfleet servers answering
// DHCP on one LAN answers a client, so that a client never gets two
// offers racing for it from servers that share one lease store.
//
// It is RFC 3074 load balancing: the client's hardware address hashes
// (the RFC's Pearson hash, hash.go) to one of 256 buckets, and every
// server computes the same owner for each bucket from the same list of
// servers (assign.go). The owner answers; a live server covers a bucket
// whose owner is stale, or a client whose secs field says it has waited
// past a threshold (Decision).
//
// Which servers share a LAN is told by an address each registers beside
// its others: dhcp-MODE://SUBNET (Scope), so servers of one fleet on
// other LANs, or without DHCP, never own a bucket here.
//
// The package is pure: it knows neither the store nor the servers table.
// membership.DHCPPeers builds the current picture from the table as
// the fleet view last read it, so the packet path reads memory only, and
// the DHCP server takes it through its own small interface (dhcp.Peers).
package dhcplb
