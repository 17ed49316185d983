package app

import (
	"log/slog"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcplb"
	"github.com/bootfleet/bootfleet/internal/membership"
)

// dhcpPeers is this server's place among the servers answering DHCP on
// its LAN: the dhcp-MODE://SUBNET address it registers beside its others,
// and the DHCPPeers that tells its DHCP server which clients are its own.
// A server alone (SQLite, or the only one registered with that address)
// answers every client, as without it.
func dhcpPeers(c *config.Config, serverIP net.IP, view *membership.View, log *slog.Logger) (string, *membership.DHCPPeers) {
	mask := net.CIDRMask(32, 32)
	if a, err := lookupInterface(c.Interface); err == nil && (&net.IPNet{IP: a.IP.Mask(a.Mask), Mask: a.Mask}).Contains(serverIP) {
		mask = a.Mask
	}
	scope := dhcplb.Scope(c.DHCP.Mode, serverIP, mask)
	return scope, membership.NewDHCPPeers(membership.DHCPPeersConfig{View: view, Scope: scope,
		Wait: time.Duration(c.DHCP.CoverAfter), Logger: log})
}

// dhcp6Peers is dhcpPeers for DHCPv6 in full mode: its scope is
// dhcp-full6://PREFIX, the /64 of dhcp6.range, so the servers leasing
// from one range share its buckets (over the DUID) apart from their
// DHCPv4 ones. The cover threshold is dhcp.cover_after's.
func dhcp6Peers(c *config.Config, view *membership.View, log *slog.Logger) (string, *membership.DHCPPeers) {
	p := managedPrefix(c)
	if !p.IsValid() {
		return "", nil
	}
	scope := dhcplb.Scope("full6", net.IP(p.Addr().AsSlice()), net.CIDRMask(p.Bits(), 128))
	return scope, membership.NewDHCPPeers(membership.DHCPPeersConfig{View: view, Scope: scope,
		Wait: time.Duration(c.DHCP.CoverAfter), Logger: log})
}
