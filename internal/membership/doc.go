// Package membership makes a bootfleet server a member of its fleet:
// the servers that share one inventory store. [Registry.Run] registers
// the server in the store's servers table (name, addresses, version,
// start time), writes a heartbeat with the server's load every 10 s and
// marks the server stopped when it shuts down. Readers (the API, `bootfleet
// server list`, the dashboard) list the table and call a server live or
// stale by the age of its heartbeat (inventory.ServerInfo.Status).
// A name belongs to one server at a time: [Registry.Register] refuses
// the name of a live server of another instance (LoadInstance keeps this
// server's in its data directory), so cloned hosts with one host name do
// not merge into one row.
//
// The readers that act on the table live beside it: [View] keeps it in
// memory, [Spread] orders the servers for a machine's boot by load and by
// the image copies each holds ([Holdings]), and [DHCPPeers] turns it into
// the RFC 3074 bucket assignment (package dhcplb) of the servers
// answering DHCP on this server's LAN. It is a package of its own, not
// part of inventorysvc, because it is about servers rather than machines.
//
// Nothing here runs on a hot path: the heartbeat has its own goroutine,
// reads counters the servers keep anyway, and bounds every store write
// with a timeout, so a slow or unreachable database delays heartbeats,
// never a DHCP reply or a block of a transfer.
package membership
