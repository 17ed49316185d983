package dhcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// Fixed names, so the commands in the report are exact. A lock keeps two
// benches apart; a run killed halfway leaves namespaces that the next run
// deletes first.
const (
	nsServer   = "bf-dhcpb-srv"
	nsClient   = "bf-dhcpb-cli"
	vethServer = "dhcpb-srv"
	vethClient = "dhcpb-cli"
	serverAddr = "10.216.0.1"
	clientAddr = "10.216.0.2"
	prefixLen  = 16
	// The pool: 65024 addresses, far more than any run hands out, so no
	// server ever runs out and every run starts from an empty store anyway.
	poolFirst = "10.216.1.0"
	poolLast  = "10.216.254.255"
	lockFile  = "/run/bootfleet-dhcpbench.lock"
)

// buildTopology makes the two namespaces and the unshaped veth pair:
// perfdhcp's rate, not the link, is what is measured.
func buildTopology(ctx context.Context) (*harness.Net, error) {
	return harness.NewPair(ctx, harness.Pair{ServerNS: nsServer, ClientNS: nsClient,
		ServerDev: vethServer, ClientDev: vethClient, ServerAddr: serverAddr, ClientAddr: clientAddr,
		PrefixLen: prefixLen})
}

// listeningOn67 is a readiness check of the server in namespace ns: every
// server here opens UDP port 67 only once its lease store is loaded.
func listeningOn67(ctx context.Context, ns string) func() error {
	return func() error {
		out, err := harness.Output(ctx, "ip", "netns", "exec", ns, "ss", "-Hlun", "sport", "=", ":67")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return fmt.Errorf("nothing listens on UDP port 67 yet")
		}
		time.Sleep(300 * time.Millisecond) // let it settle past startup logging
		return nil
	}
}
