// Package nbddurability holds the diskless roots' storage proofs against a real
// `bootfleet serve` child process on loopback, driven by real NBD clients
// (qemu-io, nbdcopy):
//
//   - kill -9 durability: what a client was told is durable (a write with
//     FUA, or any write before a completed FLUSH) is there after SIGKILL
//     and a restart on the same data directory, and a slot released but
//     not yet flushed is never reused under a block the on-disk map still
//     points at;
//   - full disk: an overlay on a small tmpfs runs out of space; the client
//     gets ENOSPC, the server logs it and keeps serving, and the overlay
//     reads back intact, also after a kill -9 and restart.
//
// It needs root (tmpfs mount) and qemu-io, nbdcopy (qemu-utils,
// libnbd-bin). Without them it skips, unless BOOTFLEET_CI=1, where a
// missing prerequisite is a failure. BOOTFLEET_BIN names a prebuilt
// bootfleet binary; otherwise the test builds one from this tree.
package nbddurability
