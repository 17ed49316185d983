// Package dhcp is bootfleet's DHCPv4 server: a full server that leases
// addresses, or a proxyDHCP server (PXE 2.1 section 2.2.3) that only tells
// boot firmware what to load and leaves addresses to the site's DHCP server.
//
// The wire format is github.com/insomniacslk/dhcp/dhcpv4. The package has the
// house's three layers:
//
//   - transport (server.go, socket_linux.go): one UDP socket per port bound to
//     the configured interface (SO_BINDTODEVICE), decoding, validation, and
//     choosing where a reply goes (broadcast, unicast, relay);
//   - policy (policy.go, proxy.go): pure functions from a request to a reply,
//     using [pxe.Detect] and [pxe.PlanFor] for the boot options;
//   - leases (alloc.go, pool.go, groupcommit.go, leasestore.go): the address
//     allocator and the [LeaseStore] it persists through before any ACK
//     leaves the server. Packets are handled by a pool of workers, so the
//     leases of concurrent REQUESTs share one commit when the store is a
//     [BatchStore]. Addresses clients DECLINEd are held back, and kept in
//     Config.HoldFile so a restart does not offer them again (holds.go).
//   - several servers on one LAN (balance.go, shared.go): with Config.Peers
//     each answers only the clients RFC 3074 load balancing gives it
//     (package dhcplb), and its allocator keeps in step with the leases
//     the others write to the shared store.
//
// Bad or foreign packets are dropped with a Debug log line; a panic while
// handling one packet is recovered and logged, and the server keeps serving.
package dhcp
