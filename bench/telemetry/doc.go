// Package telemetry measures what boot telemetry costs: the same HTTP and
// TFTP downloads from bootfleet with `telemetry: on` and `telemetry: off`,
// alternating which goes first each round so machine noise hits both alike,
// medians compared. It runs on the loopback of a private namespace with no
// shaping: CPU is the only limit, which is where recording could show.
// Server CPU is read from schedstat over all of bootfleet's threads, the
// steadier figure on a shared machine. It writes BENCHMARKS-telemetry.md.
package telemetry
