// Package telemetry records every network boot as a timeline, phase by
// phase, and exports Prometheus metrics about the boot servers.
//
// A boot is keyed by the machine's MAC and the time of its first DHCP
// packet. It collects the DHCP packets the server answered, the files the
// machine downloaded over TFTP and HTTP, the milestones its client
// reported, and the moment its OS called the DoneURL. The Recorder's hooks
// are O(1) under one mutex and never do I/O, so the DHCP, TFTP and HTTP
// servers can call them on their hot paths; everything derived (phases,
// throughput, summaries) is computed when someone reads a boot.
//
// The Recorder is the server's one boot clock: Complete, which the
// DoneURL calls, ends the boot and says how long it took since its first
// DHCP packet. With telemetry off it hears only DHCP and the DoneURL,
// and keeps its boots in memory without a queue to the store.
//
// The Recorder keeps recent boots in memory: some per machine
// (Config.PerMachine) and a bounded total (Config.MaxBoots). A History
// makes them outlive a restart: when a boot completes or fails, or leaves
// memory unfinished, the hook hands a copy to a bounded queue without
// waiting (a full queue drops it, counted in
// bootfleet_boot_records_dropped_total), and History.Run writes the queue
// to the inventory in batches and deletes old records by age and count.
// History reads both, memory winning for a boot in both, so the API and
// `bootfleet boots` see one list. Stored records keep the raw timeline;
// summaries and phases are derived at each read (stored.go).
//
// Servers of one fleet share one store, and one boot may be served by
// several: DHCP from one, the kernel from another, the NBD root from a
// third, the DoneURL to any. Each records its own part, names itself on
// every event (Config.Server), and stores open parts once they are quiet
// for a few seconds, so the others see them before the boot ends. Reads
// merge the parts of every server into one boot (merge.go says how, and
// why at read time rather than by a join when the parts are written).
package telemetry
