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
// Records live in memory only: recent boots per machine (Config.PerMachine)
// and a bounded total (Config.MaxBoots). A restart of bootfleet forgets
// them; the inventory keeps the durable per-machine state.
package telemetry
