// Package transfer measures bootfleet's TFTP and HTTP serving against its
// peers (dnsmasq, tftp-hpa, atftpd and nginx) and writes
// BENCHMARKS-transfer.md with PNG plots in bench/results. `make
// bench-transfer` runs it alone, `make bench` with the others; it is not
// part of `make test`.
//
// Every measurement runs in private network namespaces that it creates and
// always deletes: a server namespace and a client namespace joined by a
// veth pair shaped with tbf on both ends, and a loopback-only namespace for
// unshaped runs. Clients are Debian's atftp (TFTP) and curl (HTTP); each
// download is streamed through a FIFO into sha256 and compared with the
// source, so a wrong file counts as a failed run, never as a number.
//
// Needs root. `bin/bench transfer -h` lists the flags; `-quick` is a smoke
// run of a few minutes with small files, `-cases 1,4` runs only some cases.
//
// `bin/bench transfer ab head=OLD new=NEW` tries a change to the lockstep
// path first (ab.go): interleaved rounds of one lockstep transfer per build
// and per peer, a round-by-round sign test, server CPU and thread wakeups
// per block; -trace adds a perf trace of one transfer each (trace.go) and
// -report writes it all into the report's A/B section, which full runs keep.
package transfer
