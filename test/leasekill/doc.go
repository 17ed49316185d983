// Package leasekill holds the kill -9 lease durability test: a
// burst of DHCP DORA exchanges from many MACs against `bootfleet serve`
// (full mode, SQLite), the server killed with SIGKILL mid-burst and
// restarted on the same data directory. It proves that every ACK a client
// got is in the store afterwards and that no address ever went to two MACs.
//
// It needs root (network namespaces, veth, port 67). As a normal user it
// skips, unless BOOTFLEET_CI=1, where a missing prerequisite is a failure.
// BOOTFLEET_BIN names a prebuilt bootfleet binary; otherwise the test builds
// one from this tree with `go build`.
package leasekill
