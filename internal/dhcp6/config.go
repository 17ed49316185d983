package dhcp6

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// Default and bounds of the lease time.
const (
	DefaultLeaseTime = time.Hour
	MinLeaseTime     = time.Minute
	// MaxRange bounds the pool so a free address is found by a scan.
	MaxRange = 1 << 16
)

// Config configures a Server.
type Config struct {
	Interface string // required: the server binds to this interface only
	// ServerIP is the server's IPv6 address in boot URLs: global or
	// unique-local, on Interface. Required.
	ServerIP net.IP
	// MAC is the interface's hardware address, for the server DUID
	// (DUID-LL, RFC 8415 section 11.4). Required.
	MAC net.HardwareAddr

	// Proxy answers boot firmware only, with boot options and never an
	// address, beside another DHCPv6 server that hands out addresses
	// (proxy.go); Range, LeaseTime and Leases are then unused.
	Proxy bool

	RangeStart, RangeEnd netip.Addr    // required unless Proxy; at most MaxRange addresses
	LeaseTime            time.Duration // default DefaultLeaseTime; at least MinLeaseTime
	// Leases persists the leases; nil keeps them in memory only, and a
	// restart then forgets which client had which address.
	Leases LeaseStore

	// Plan says what each firmware boots; Plan.HTTPBase must be the
	// IPv6 base URL (http://[addr]:port).
	Plan pxe.PlanConfig
	// Boot reports whether mac is to be booted; nil boots every machine.
	Boot func(mac net.HardwareAddr) bool
	// HostName, if set, is the inventory name of mac ("" for none); full
	// mode answers a client's FQDN option (39) with it (RFC 4704). It is
	// called per reply, so it must be an in-memory lookup.
	HostName func(mac net.HardwareAddr) string
	// Observe, if set, hears about every valid request from boot
	// firmware before the policy runs, solicit true for a Solicit. It
	// must not block. Other clients are not reported: EDK II's IPv6 stack
	// runs DHCPv6 of its own, with no vendor class, beside its PXE client
	// (when the router advertisement sets M), which would read as the
	// machine's OS having booted.
	Observe func(mac net.HardwareAddr, solicit bool, c pxe.Client)
	// Peers, when set, are the other servers of the fleet answering
	// DHCPv6 on this link from the same lease store: each answers the
	// clients RFC 3074 load balancing over the DUID gives it (balance.go)
	// and starts its search for free addresses in its own part of the
	// range. Nil: it answers everyone.
	Peers  Peers
	Logger *slog.Logger // default: discard

	Port            int // default 547; tests use a high port
	BootServicePort int // proxy mode only; default BootServicePort (4011)
}

func (c *Config) check() error {
	if c.Interface == "" {
		return errors.New("dhcp6: no interface configured; set interface")
	}
	if c.ServerIP.To16() == nil || c.ServerIP.To4() != nil || c.ServerIP.IsLinkLocalUnicast() {
		return fmt.Errorf("dhcp6: server IP %v is not a global or unique-local IPv6 address; set server_ip6 or give %s one", c.ServerIP, c.Interface)
	}
	if len(c.MAC) == 0 {
		return fmt.Errorf("dhcp6: interface %s has no hardware address for the server DUID", c.Interface)
	}
	if c.Port == 0 {
		c.Port = 547
	}
	if c.BootServicePort == 0 {
		c.BootServicePort = BootServicePort
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Proxy {
		return nil
	}
	if n, err := rangeSize(c.RangeStart, c.RangeEnd); err != nil || n > MaxRange {
		return fmt.Errorf("dhcp6: range %v-%v: want at most %d IPv6 addresses, first before last (%v)", c.RangeStart, c.RangeEnd, MaxRange, err)
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.LeaseTime < MinLeaseTime {
		return fmt.Errorf("dhcp6: lease %v is shorter than %v", c.LeaseTime, MinLeaseTime)
	}
	return nil
}

// rangeSize counts the addresses of first-last, or fails when they are
// not IPv6 or out of order.
func rangeSize(first, last netip.Addr) (int, error) {
	if !first.Is6() || !last.Is6() || first.Is4In6() || last.Is4In6() {
		return 0, errors.New("not IPv6 addresses")
	}
	if last.Less(first) {
		return 0, errors.New("first is after last")
	}
	n := 1
	for a := first; a != last; a = a.Next() {
		if n++; n > MaxRange {
			return n, nil
		}
	}
	return n, nil
}
