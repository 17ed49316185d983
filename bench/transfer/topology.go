package transfer

import (
	"context"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// Namespace names are fixed, not per-PID, so that the commands printed in
// BENCHMARKS-transfer.md are exact; a lock file keeps two benches from
// sharing them, and a run deletes what a killed run left behind first.
const (
	nsServer   = "bf-bench-srv"
	nsClient   = "bf-bench-cli"
	nsLoopback = "bf-bench-lo"
	serverAddr = "10.77.0.1"
	clientAddr = "10.77.0.2"
	linkMTU    = 1500
)

// newShaped builds server and client namespaces joined by a veth pair with
// tbf at rate on both ends.
func newShaped(ctx context.Context, rate string) (*harness.Net, error) {
	return harness.NewPair(ctx, harness.Pair{ServerNS: nsServer, ClientNS: nsClient,
		ServerDev: "bfb-srv", ClientDev: "bfb-cli", ServerAddr: serverAddr, ClientAddr: clientAddr,
		MTU: linkMTU, Rate: rate})
}

// newLoopback builds the loopback-only namespace: CPU is the only limit.
func newLoopback(ctx context.Context) (*harness.Net, error) {
	return harness.NewLoopback(ctx, nsLoopback)
}
