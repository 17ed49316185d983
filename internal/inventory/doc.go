// Package inventory is bootfleet's record of the fleet: machines, profiles,
// DHCP and DHCPv6 leases, boot events, images, the fleet's servers ([Servers]) and
// the boot history (telemetry's records of boots that ended,
// [BootRecords]), behind the [Store] interface. Two backends implement
// it: inventory/sqlite (embedded, the default, in the data directory) and
// inventory/postgres (for several servers sharing a fleet).
// Both pass the same suite in inventory/storetest.
//
// Its model is the fleet's domain: [Profile] (with its [Root]) is the one
// profile type that the fleet view, the boot server and the diskless
// roots take, and the values a profile may hold (loaders, [OverlayModes],
// [RootKernelImage]) and their checks live here. The config file is only
// one source of records; package inventorysvc maps it onto this model.
//
// The store is the durable source of truth, not the hot path: DHCP, TFTP
// and HTTP answer from the in-memory machineview.View, which is rebuilt from the
// store after every write (see [Snapshot]).
package inventory
