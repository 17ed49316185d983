// Package storm measures boot storms: `bootfleet storm` powers on N
// emulated machines at once (N = 1 to 200, uefi and ipxe firmware) against
// bootfleet and against the stack admins build by hand (dnsmasq for DHCP
// and TFTP, nginx for HTTP, nbdkit for one read-only NBD export), over a
// server link shaped to 1 Gbit/s. Each figure stands beside the physical
// limit for that N: the bytes all N machines must move over that link. It
// writes BENCHMARKS-storm.md.
//
// The server runs in one namespace, the simulator in another; only the
// server's egress is shaped (tbf, overhead 24 as every bench here). Each
// run starts every server fresh. Server CPU comes from its cgroup, client
// CPU from the simulator's rusage, the server's memory from VmHWM: with
// two CPUs driving 200 emulated clients, the report shows where the time
// goes.
package storm
