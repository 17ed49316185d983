package dhcplb

import (
	"net"
	"testing"
)

func TestScope(t *testing.T) {
	if got := Scope("full", net.IPv4(10, 213, 0, 7), net.CIDRMask(24, 32)); got != "dhcp-full://10.213.0.0/24" {
		t.Fatalf("Scope = %q", got)
	}
}
