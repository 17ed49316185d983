package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// serverIP6 is the server's IPv6 address for boot URLs on the interface:
// server_ip when it is IPv6, else the interface's first global or
// unique-local address.
func serverIP6(c *config.Config, serverIP net.IP) (net.IP, *net.Interface, error) {
	ifc, err := net.InterfaceByName(c.Interface)
	if err != nil {
		return nil, nil, fmt.Errorf("dhcp6: interface %q: %w", c.Interface, err)
	}
	if serverIP.To4() == nil {
		return serverIP, ifc, nil
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, nil, fmt.Errorf("dhcp6: interface %q: list addresses: %w", c.Interface, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP, ifc, nil
		}
	}
	return nil, nil, fmt.Errorf("dhcp6: interface %q has no global or unique-local IPv6 address; give it one in dhcp6.range's /64 (ip addr add fd00:213::1/64 dev %s)", c.Interface, c.Interface)
}

// newDHCP6 builds the DHCPv6 server. Its boot URLs use ip6, its leases
// go to leases (the inventory), and its packets reach the same observer
// as DHCPv4's: Solicit as DISCOVER, the rest as REQUEST, which is what
// boot records and discovery tell apart.
func newDHCP6(c *config.Config, ip6 net.IP, ifc *net.Interface, httpPort string, view *machineview.View, leases dhcp6.LeaseStore,
	obs dhcp.Observer, noBoot func(net.HardwareAddr, string), peers dhcp6.Peers, log *slog.Logger) (*dhcp6.Server, error) {
	var first, last netip.Addr
	if c.DHCP6.Mode == "full" {
		var err error
		if first, last, err = c.DHCP6.ParseRange(); err != nil {
			return nil, fmt.Errorf("dhcp6.range: %w", err)
		}
	}
	return dhcp6.New(dhcp6.Config{
		Interface: c.Interface, ServerIP: ip6, MAC: ifc.HardwareAddr, Proxy: c.DHCP6.Mode == "proxy",
		RangeStart: first, RangeEnd: last, LeaseTime: time.Duration(c.DHCP6.Lease), Leases: leases,
		Plan: pxe.PlanConfig{
			BIOSFile: c.IPXE.BIOSBinary, EFIx64File: c.IPXE.EFIBinary, EFIARM64File: c.IPXE.EFIARM64Binary,
			HTTPBase:        "http://" + net.JoinHostPort(ip6.String(), httpPort),
			Signed:          signed(view),
			SignedARM64:     c.SecureBoot.ShimARM64 != "",
			SignedARM64Disk: c.SecureBoot.GrubARM64Disk != "",
			Boots:           boots(view, noBoot),
		},
		Boot:     func(mac net.HardwareAddr) bool { _, boot := view.Lookup(mac); return boot },
		HostName: hostName(view),
		Observe: func(mac net.HardwareAddr, solicit bool, cl pxe.Client) {
			t := dhcpv4.MessageTypeRequest
			if solicit {
				t = dhcpv4.MessageTypeDiscover
			}
			obs.DHCPPacket(mac, t, cl)
		},
		Peers:  peers,
		Logger: log,
	})
}

// managedPrefix is the /64 of dhcp6.range, which router advertisements
// announce when DHCPv6 serves addresses; invalid when it does not.
func managedPrefix(c *config.Config) netip.Prefix {
	if c.DHCP6.Mode != "full" {
		return netip.Prefix{}
	}
	first, _, err := c.DHCP6.ParseRange()
	if err != nil {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(first, 64).Masked()
}

// listenTFTP6 opens the TFTP port on IPv6 beside the IPv4 one.
func listenTFTP6(ctx context.Context, listen string) (net.PacketConn, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		port = "69"
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("tftp.listen %q: want :PORT", listen)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp6", "[::]:"+port)
	if err != nil {
		return nil, fmt.Errorf("tftp: listen on IPv6 port %s: %w", port, err)
	}
	return pc, nil
}
