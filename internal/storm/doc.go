// Package storm is a client-side boot storm simulator: it boots N emulated
// machines from whatever server answers on a network interface, each one
// speaking the protocols in the order real firmware does, and reports how
// long every phase took and how many bytes it moved.
//
// A machine plays one firmware (uefi: OVMF/EDK II, bios: a PXE ROM, ipxe:
// iPXE in ROM). It takes a lease with DHCP from its own MAC, adds the leased
// address as a secondary address on the interface and uses it as the source
// of everything after: TFTP of the NBP with that firmware's options, DHCP
// again as iPXE, HTTP of its iPXE script and of every file the script names,
// a replay of a recorded NBD read trace when the kernel command line names a
// diskless root, and finally a GET of its DoneURL.
//
// An image the script names by mtftp:// is fetched as iPXE's PXE MTFTP
// client fetches it (mtftp.go): an RRQ from the machine's own socket,
// the blocks from iPXE's fixed group 239.255.1.1:3001, its retry timer,
// and its fallback to plain TFTP; `kernel A || kernel B` tries B when A
// fails (image.go). The machines share one socket on that group
// (mtftpgroup.go), whose reader updates every listening machine's bitmap
// under one lock; each machine's peer, bitmap and timer are its own.
//
// When the command line turns the agent's root proxy on (the server names
// a multicast group: bootfleet.mcast=), the trace is read as a real agent
// reads it: through internal/rootproxy's Proxy, built by agent.ProxyConfig
// from the same command line, its read cache 10% of an emulated RAM
// (Config.RAM) and its mcast.Receiver asking the server for the chunks
// its reads miss (proxy.go). The machines share one socket per group
// (mcast.Hub), which hands each datagram to every Receiver; the rest of
// each Receiver, its requests, repairs and fallback, is its own.
//
// The package has three layers:
//
//   - pure codecs and parsers (script.go, trace.go, udp4.go, tcpstream.go,
//     nbdstream.go, dhcpmsg.go, mac.go, report.go): bytes or text in,
//     values out, each decoder with a fuzz target seeded from testdata/fuzz;
//   - protocol clients (dhcp.go over dhcpconn_linux.go, fetch.go, nbd.go,
//     mtftp.go, addr_linux.go, and tftp.Get beside bootfleet's TFTP server): one
//     exchange each, bounded by a context and timeouts;
//   - orchestration (machine.go, run.go, proxy.go, progress.go, summary.go): power-on
//     ramp, per-machine phases, progress on stderr and the final report.
//
// Record (record_linux.go) goes the other way: it follows, on the server's
// interface, what NBD clients send and returns their reads as a Trace, so
// a boot of any image can be replayed. testdata/debian12.trace, the
// default, is one recorded from a stock Debian 12 booting diskless.
package storm
