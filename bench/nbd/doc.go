// Package nbd measures bootfleet's NBD server beside qemu-nbd, nbdkit's
// file plugin and nbd-server, all serving the same image in one run, and
// writes BENCHMARKS-nbd.md. `make bench-nbd` runs it alone (flags in ARGS),
// `make bench` with the others.
//
// Cases (-cases): reads (sequential read of a 512 MiB export with nbdcopy,
// MB/s; 4 KiB random read with fio's nbd engine, one connection, queue
// depth 32, IOPS), writes (4 KiB random write; bootfleet through a
// persistent copy-on-write overlay, then random read through the filled
// overlay), diskwrites (random write with the files on the real disk),
// diskrereads (the same right after the server read its whole export from
// a cold page cache) and readers (1, 10 and 50 clients reading a 128 MiB
// image from the disk at once, with the bytes the disk read).
//
// Everything runs on the loopback of a private network namespace: Main
// builds it and runs the bench again inside it (ip netns exec), so that
// servers, clients and this process's own HTTP requests all see only the
// namespace, and no client pays for entering it. The 512 MiB image and
// every file of the read and write cases are on /dev/shm: no link and no
// disk limit, CPU is the only one. The disk cases and the readers use
// /var/tmp. Each round runs every server, starting with a different one,
// so machine noise hits all alike; the ceilings are the same operations on
// the local file without NBD. Server CPU is /proc/PID/stat's user and
// system time of the server and its reaped children (ip netns exec mounts
// a /sys of its own, so the cgroup tree is out of sight), client CPU the
// rusage of each client process.
//
// `bin/bench nbd ab NAME=BINARY ...` is the quick A/B of bootfleet builds
// on fio's 4 KiB random I/O, interleaved with nbdkit, for trying a change
// to the NBD path before running the whole bench (see ab.go). With
// `-layers 3` it instead reads an image version stored as three delta
// layers against the same bytes stored whole, from one server (see
// layers.go); `-report BENCHMARKS-nbd.md` writes that into the report's
// section for it, which full runs keep.
//
// Needs root, bin/bootfleet (make build) and the peers and clients that
// scripts/bench-deps.sh installs.
package nbd
