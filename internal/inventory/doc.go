// Package inventory is bootfleet's record of the fleet: machines, profiles,
// DHCP and DHCPv6 leases, boot events, images, the fleet's servers ([Servers]) and
// the boot history (telemetry's records of boots that ended,
// [BootRecords]), behind the [Store] interface. Two backends implement
// it: inventory/sqlite (embedded, the default, in the data directory) and
// inventory/postgres (for several servers sharing a fleet).
// Both pass the same suite in inventory/storetest.
//
// The store is the durable source of truth, not the hot path: DHCP, TFTP
// and HTTP answer from the in-memory fleet.View, which is rebuilt from the
// store after every write (see [Snapshot]).
package inventory
