// Package inventorysvc runs the inventory for a serving bootfleet. It
// keeps the fleet view (package machineview) in step with the store, writes
// DHCP's leases, records the machines DHCP sees and marks booted those
// whose boot completes. Nothing here runs in the DHCP hot path except a
// non-blocking channel send.
//
// Where each thing is written:
//
//   - A DHCP lease: [Leases.Put] and [Leases.PutBatch] (leases.go), which
//     the DHCP server calls before each ACK; they return once the store
//     has committed. [Leases.LeaseIP] reads one back by MAC for the NBD
//     server's source-address check. A DHCPv6 lease: [Leases6.Put]
//     (leases6.go), before each Reply that grants one.
//   - A discovered machine, and a known machine's boot start: the worker
//     of [Service.Run] (sightings.go), fed by [Service.Observer] and paced
//     by a backlog (backlog.go) so a storm of DHCPDISCOVERs never delays
//     a lease commit.
//   - The state of a machine whose boot completed: [Service.BootClock]
//     (bootclock.go). The boot's record is telemetry's.
//   - The fleet view: [Service.Refresh] (view.go), at start, after every
//     API write ([Service.Changed]) and, for a store other servers share,
//     periodically from Run.
//
// The store itself is opened by [OpenStore] and applied from the config by
// [New] ([ApplyConfig], apply.go); the caller closes it. fromconfig.go is
// the one place where the config file's profiles, machines and discovery
// policy become the inventory's records and the fleet view's policy.
package inventorysvc
