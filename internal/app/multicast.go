package app

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/mcast"
)

// multicastConfig is the diskless service's multicast from the config:
// nil when multicast.mode is off, NBD is off, or the server has no IPv4
// address to send from (the multicast root is IPv4 only).
func multicastConfig(c *config.Config, serverIP net.IP) (*diskless.Multicast, error) {
	if c.Multicast.Mode == "off" || c.NBD.Listen == "off" || serverIP.To4() == nil {
		return nil, nil
	}
	space, err := c.Multicast.Space()
	if err != nil {
		return nil, fmt.Errorf("multicast.group: %w", err)
	}
	rate, err := c.Multicast.BytesPerSecond(mcast.LinkBits(c.Interface))
	if err != nil {
		return nil, fmt.Errorf("%w (interface %s)", err, c.Interface)
	}
	var ifi *net.Interface
	if c.Interface != "" {
		if ifi, err = net.InterfaceByName(c.Interface); err != nil {
			return nil, fmt.Errorf("multicast: interface %s: %w (set interface, or multicast.mode: off)", c.Interface, err)
		}
	}
	ip, _ := netip.AddrFromSlice(serverIP.To4())
	return &diskless.Multicast{Listen: netip.AddrPortFrom(ip, uint16(c.Multicast.Port)), Interface: ifi,
		TTL: c.Multicast.TTL, Rate: rate, Space: space}, nil
}
