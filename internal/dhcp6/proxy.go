package dhcp6

import (
	"net"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// BootServicePort is where EDK II's PXEv6 client asks a proxy for its
// boot file once it has an address (UEFI 2.10 section 24.3.1, the
// IPv6 twin of PXE boot server discovery on UDP 4011).
const BootServicePort = 4011

// handleProxy answers m in proxy mode: beside a DHCPv6 server that hands
// out addresses, answer boot firmware only, with the boot options and
// never an IA_NA.
//
// EDK II (NetworkPkg/UefiPxeBcDxe, PxeBcDhcp6.c) classifies an Advertise
// without an IA_NA whose vendor class (16, enterprise 343) starts
// "PXEClient" as a "proxy BINL" offer: it takes its address from the
// other server's Advertise, and then, with that address, sends a Request
// carrying our server ID and no IA to the address in our boot file URL,
// port 4011 to 4011. Only the Reply to that Request is used for the boot
// file, so it carries the boot options again. An Advertise carrying an
// IA_NA would not be a proxy offer, and one whose IA_NA said
// NoAddrsAvail would be dropped. Information-Request (stateless DHCPv6,
// as iPXE sends when a router advertisement sets only O) gets the boot
// options too; Request, Renew, Rebind, Release and Decline on port 547
// belong to the address server and get nothing.
func (s *Server) handleProxy(m *dhcpv6.Message, mac net.HardwareAddr, c pxe.Client, bsPort bool) (*dhcpv6.Message, string) {
	if !c.Boot() {
		return nil, "proxy: not a boot client (no PXEClient/HTTPClient vendor class, not iPXE)"
	}
	if mac == nil {
		return nil, "proxy: the client's MAC is unknown (no DUID-LL(T), no EUI-64 link-local source, no Solicit seen)"
	}
	if s.cfg.Boot != nil && !s.cfg.Boot(mac) {
		return nil, "proxy: machine is configured not to boot"
	}
	var t dhcpv6.MessageType
	switch {
	case m.Type() == dhcpv6.MessageTypeSolicit && !bsPort:
		t = dhcpv6.MessageTypeAdvertise
	case m.Type() == dhcpv6.MessageTypeRequest && bsPort && m.Options.ServerID() != nil,
		m.Type() == dhcpv6.MessageTypeInformationRequest:
		t = dhcpv6.MessageTypeReply
	default:
		return nil, "proxy: " + m.Type().String() + " is for the address server"
	}
	out := s.reply(m, t)
	if !s.bootOptions(out, c, mac) {
		return nil, "proxy: no boot file for this client"
	}
	if c.PXE && len(out.Options.VendorClasses()) == 0 {
		out.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: enterpriseEDK2, Data: [][]byte{[]byte(pxe.VendorPXE)}})
	}
	return out, ""
}

// macCache remembers the MAC of each client (by DUID) seen with one, so
// a Request to port 4011, sent from the address the other server gave
// and so no EUI-64 link-local, still finds its machine. It holds at most
// macCacheSize clients, each for macCacheTTL.
type macCache struct {
	mu sync.Mutex
	m  map[string]macSeen
}

type macSeen struct {
	mac net.HardwareAddr
	at  time.Time
}

const (
	macCacheSize = 4096
	macCacheTTL  = 10 * time.Minute
)

func (c *macCache) put(key string, mac net.HardwareAddr, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= macCacheSize {
		for k, v := range c.m {
			if now.Sub(v.at) > macCacheTTL {
				delete(c.m, k)
			}
		}
		if c.m == nil || len(c.m) >= macCacheSize {
			c.m = map[string]macSeen{}
		}
	}
	c.m[key] = macSeen{mac, now}
}

func (c *macCache) get(key string, now time.Time) net.HardwareAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[key]; ok && now.Sub(v.at) <= macCacheTTL {
		return v.mac
	}
	return nil
}
