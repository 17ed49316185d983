// Package nbd is bootfleet's Network Block Device protocol: the server
// that serves disk images to diskless clients (the Linux kernel's nbd
// driver, qemu, libnbd), and the client's side of the handshake
// (clienthandshake.go), which bootfleet-agent runs before it hands the
// socket to the kernel, and the storm simulator before it replays reads.
//
// It implements the protocol of NetworkBlockDevice/nbd doc/proto.md:
//
//   - fixed newstyle handshake, with NBD_FLAG_NO_ZEROES;
//   - options NBD_OPT_EXPORT_NAME, NBD_OPT_ABORT, NBD_OPT_INFO, NBD_OPT_GO
//     (INFO extension: NBD_INFO_EXPORT, NBD_INFO_NAME, NBD_INFO_DESCRIPTION,
//     NBD_INFO_BLOCK_SIZE) and NBD_OPT_STRUCTURED_REPLY; NBD_OPT_LIST is
//     refused (export names are secrets); every other option (STARTTLS,
//     metadata contexts, extended headers) is answered with
//     NBD_REP_ERR_UNSUP;
//   - commands NBD_CMD_READ, WRITE, FLUSH, TRIM, WRITE_ZEROES and DISC with
//     the FUA, NO_HOLE and DF flags; simple replies, or structured replies
//     (OFFSET_DATA, NONE, ERROR) once negotiated.
//
// The server has two layers:
//
//   - codec (handshake.go, options.go, transmission.go, consts.go): bytes to
//     messages and back; pure, no sockets, no logging, fuzzed.
//   - transport (server.go, session.go, requests.go, replies.go, wire*.go):
//     server.go accepts TCP connections; session.go runs the handshake;
//     requests.go is the request loop of each connection, which answers
//     what needs no wait on the spot and hands the rest to a few workers;
//     replies.go queues replies and batches them onto the socket, which
//     wire_linux.go writes with sendmsg and sendfile; budget.go bounds the
//     buffers a connection and a client address hold until replies leave.
//
// The contract with storage is the Export (export.go): an ExportInfo,
// read once when a client picks the export, says what it is and can do
// (size, read-only, multi-conn, block sizes, revocation), and its Store
// (store.go) is the one data path. A READ is answered in requests.go: the
// request loop asks ReadNow, a worker asks ReadSpan, and the server sends
// the Span it gets (bytes, or a span of a file for sendfile) without
// choosing how. WRITEs go to WriteNow on the loop, else to WriteAt on a
// worker.
//
// Policy (which export a client gets, and whether it may have it at all)
// is the caller's Exports implementation; storage is the caller's Export
// (see internal/blockstore for images and copy-on-write overlays).
package nbd
