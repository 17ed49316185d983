// Package fleetservers makes a bootfleet server a member of its fleet:
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
// It is a package of its own, not part of inventorysvc, because it is
// about servers rather than machines, and because the later parts of
// issue 21 (DHCP load balancing, picking the least-loaded server for an
// image) read the same table and belong beside it.
//
// Nothing here runs on a hot path: the heartbeat has its own goroutine,
// reads counters the servers keep anyway, and bounds every store write
// with a timeout, so a slow or unreachable database delays heartbeats,
// never a DHCP reply or a block of a transfer.
package fleetservers
