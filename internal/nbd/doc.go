// Package nbd is bootfleet's Network Block Device server: it serves disk
// images to diskless clients (the Linux kernel's nbd driver, qemu, libnbd).
//
// It implements the protocol of NetworkBlockDevice/nbd doc/proto.md:
//
//   - fixed newstyle handshake, with NBD_FLAG_NO_ZEROES;
//   - options NBD_OPT_EXPORT_NAME, NBD_OPT_ABORT, NBD_OPT_LIST, NBD_OPT_INFO,
//     NBD_OPT_GO (INFO extension: NBD_INFO_EXPORT, NBD_INFO_NAME,
//     NBD_INFO_DESCRIPTION, NBD_INFO_BLOCK_SIZE) and NBD_OPT_STRUCTURED_REPLY;
//     every other option (STARTTLS, metadata contexts, extended headers) is
//     answered with NBD_REP_ERR_UNSUP;
//   - commands NBD_CMD_READ, WRITE, FLUSH, TRIM, WRITE_ZEROES and DISC with
//     the FUA, NO_HOLE and DF flags; simple replies, or structured replies
//     (OFFSET_DATA, NONE, ERROR) once negotiated.
//
// The package has two layers:
//
//   - codec (handshake.go, options.go, transmission.go, consts.go): bytes to
//     messages and back; pure, no sockets, no logging, fuzzed.
//   - transport (server.go, session.go): accepts TCP connections, runs the
//     handshake and then the request loop of each connection, with requests
//     of one connection processed concurrently (bounded) and replies
//     serialized on the socket.
//
// Policy — which export a client gets and whether it may have it at all —
// is the caller's Exports implementation; storage is the caller's Export
// (see internal/blockstore for images and copy-on-write overlays).
package nbd
