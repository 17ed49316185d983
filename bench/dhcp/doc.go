// Package dhcp measures full DHCPv4 DORA exchanges per second with
// Kea's perfdhcp against four servers, side by side in one run:
//
//   - bootfleet, full mode, SQLite inventory (the default);
//   - bootfleet, full mode, PostgreSQL inventory (scripts/pg-test.sh, with
//     fsync turned back on so its leases are durable too);
//   - Kea kea-dhcp4 with the memfile lease backend, persist on;
//   - dnsmasq with a lease file.
//
// Every server runs in its own fresh state (empty lease store) inside a
// private network namespace, joined by a veth pair to a client namespace
// where perfdhcp plays a relay agent for many unique clients. Each server
// gets the same offered rate and duration; runs are interleaved (run 1 of
// every server, then run 2, ...) so background load hits all alike. The
// report is the median of the runs: DORA/s, drops and the p50/p99 latency of
// both halves of the exchange, from perfdhcp's per-packet timestamps.
//
// It writes BENCHMARKS-dhcp.md with the exact commands. Needs root.
// `make bench-dhcp` installs the peers (scripts/bench-deps.sh) and runs it:
//
//	make bench-dhcp                              # about 4 minutes
//	make bench-dhcp ARGS='-rates 3000 -runs 1'
package dhcp
