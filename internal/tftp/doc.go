// Package tftp is bootfleet's read-only TFTP engine.
//
// It implements RFC 1350 (read requests only), option negotiation (RFC 2347
// OACK), blksize (RFC 2348), tsize and timeout (RFC 2349) and windowsize
// (RFC 7440). Block numbers roll over from 65535 to 0, as tftp-hpa, atftp,
// curl and iPXE expect, so files of any size can be sent.
//
// The package has three layers, each in its own files:
//
//   - codec (packet.go): bytes to packets and back; pure, fuzzed.
//   - transport (server.go, socket.go, batch_linux.go, lockstep_linux.go):
//     reads requests from a net.PacketConn and runs each transfer on its own
//     goroutine and its own UDP socket bound to the local address the request
//     arrived on. Windows go out with sendmmsg and UDP GSO; a lockstep
//     transfer, once under way, leaves the runtime's poller for blocking
//     system calls on a thread of its own (a bounded number of them).
//   - transfer policy (options.go, sender.go, rtt.go): option negotiation,
//     the windowed go-back-N sender and its adaptive retransmission timer.
//
// The client beside the server (client.go) fetches a file as boot firmware
// does: the options it asks, EDK II's size probe, the last ACK resent when
// DATA stops. The boot storm simulator emulates firmware with it, and this
// package's tests download with it.
//
// Files come from a FileSystem, a small interface any source can implement.
// RootsFS adapts a *safefs.Roots, and NewCache wraps any FileSystem with a
// shared, size-bounded in-memory cache.
package tftp
