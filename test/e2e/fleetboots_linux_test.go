package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// fleetBootRecord reads mac's boots from the API of the server at addr
// (any server of the fleet) until they are one boot whose record names
// every server in want, and returns it. The servers that did not answer
// the machine's DHCP store their part once it has been quiet for 5 s, so
// it waits up to 30 s; it fails the test with what it read last.
// A fleet test calls it after its VM booted, e.g.
//
//	b := fleetBootRecord(t, lan, dirA, mac, addrB+":8080", "a", "b")
//	if b.State != telemetry.StateComplete || b.DoneServer != "b" { ... }
func fleetBootRecord(t *testing.T, lan *netns, dir, mac, addr string, want ...string) telemetry.Boot {
	t.Helper()
	web := proxyInto(t, lan, addr)
	var list struct{ Boots []telemetry.Boot }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		getJSON(t, web+"/api/v1/boots?mac="+mac, apiToken(t, dir), &list)
		if len(list.Boots) == 1 && fleetServedBy(list.Boots[0].Servers, want) {
			writeArtifact(t, dir, "fleet-boot.json", list.Boots[0])
			return list.Boots[0]
		}
		if time.Now().After(deadline) {
			writeArtifact(t, dir, "fleet-boots.json", list.Boots)
			t.Fatalf("GET /api/v1/boots?mac=%s on %s: %d boots, want 1 served by %v: %+v", mac, addr, len(list.Boots), want, list.Boots)
		}
	}
}

func fleetServedBy(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
