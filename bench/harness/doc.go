// Package harness is what every bootfleet benchmark shares: private network
// namespaces joined by veth pairs and shaped with tbf (netns.go), server
// processes started inside them with their CPU accounted through cgroups or
// /proc (proc_linux.go), the statistics the reports quote (medians,
// nearest-rank percentiles and the round-by-round sign test, stats.go), the
// host description every report opens with (host.go), PNG plots (plot.go),
// and the index that links every report (index.go).
//
// The benches themselves live beside it: transfer (TFTP and HTTP), dhcp,
// telemetry and nbd; cmd/bench runs them. The VM boot benchmark stays in
// test/e2e, which owns the VMs, and uses this package's statistics.
package harness
