package dhcp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// Mode selects how the server behaves on the LAN.
type Mode int

// Server modes.
const (
	// ModeFull leases addresses from Config's range and sends boot options to
	// boot clients. Use it on a network with no other DHCP server.
	ModeFull Mode = iota
	// ModeProxy never assigns addresses; it answers only boot clients, on
	// UDP 67 and 4011, and coexists with the site's DHCP server.
	ModeProxy
)

// String returns "full" or "proxy", as in the config file.
func (m Mode) String() string {
	if m == ModeProxy {
		return "proxy"
	}
	return "full"
}

// ParseMode reads the config file's dhcp.mode ("full" or "proxy"; "off"
// means no DHCP server and is the caller's to handle).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "full":
		return ModeFull, nil
	case "proxy":
		return ModeProxy, nil
	}
	return 0, fmt.Errorf("dhcp mode %q: want full, proxy or off", s)
}

// LeaseFileName is the conventional lease file name inside the data directory.
const LeaseFileName = "dhcp-leases.json"

// Default and limit values for Config.
const (
	DefaultLeaseTime = time.Hour
	MinLeaseTime     = time.Minute
	MaxLeaseTime     = 365 * 24 * time.Hour // well inside option 51's 32-bit seconds
)

// Machines is the server's view of the machine inventory. It is called for
// every packet, so it must be fast and must not block (in memory).
type Machines interface {
	// Lookup returns the address reserved for mac (nil for none; it may lie
	// outside the range) and whether the machine should be booted. boot=false
	// means: full mode gives it an address but no boot options, proxy mode
	// ignores it. Unknown machines should get (nil, true) to boot the default.
	Lookup(mac net.HardwareAddr) (reserved net.IP, boot bool)
	// ReservedFor returns the MAC an address is reserved for, or nil. The
	// allocator uses it so a reserved address never goes to another machine.
	ReservedFor(ip net.IP) net.HardwareAddr
}

// Observer hears about every valid request before the policy runs. The lead
// uses it to time boots from the first DHCP packet. It must not block.
type Observer interface {
	DHCPPacket(mac net.HardwareAddr, msgType dhcpv4.MessageType, c pxe.Client)
}

// Config configures a Server. Fields marked "full" are ignored in proxy mode.
type Config struct {
	Mode      Mode
	Interface string // required: the server binds to this interface only (SO_BINDTODEVICE)
	ServerIP  net.IP // default: the interface's first IPv4 address; sent as option 54 and siaddr

	// Full mode.
	Netmask    net.IPMask    // default: the mask of the interface address holding ServerIP
	RangeStart net.IP        // full, required: first address to lease, inside ServerIP/Netmask
	RangeEnd   net.IP        // full, required: last address to lease, >= RangeStart
	LeaseTime  time.Duration // full: default DefaultLeaseTime; range MinLeaseTime..MaxLeaseTime
	// Reserve is how many addresses of the range only enrolled machines
	// may take (see Enrolled): once no more are free, machines nobody
	// enrolled get no offer, so a DHCP starvation flood of random MACs
	// cannot leave the lab's own machines without an address. Default 0
	// means a tenth of the range; -1 keeps none.
	Reserve int
	Router  net.IP   // full, optional: option 3
	DNS     []net.IP // full, optional: option 6

	// Leases persist here. LeaseStore wins when set; otherwise LeaseFile (a
	// JSON file, normally in the data directory) is used; with neither, leases
	// live in memory only and a restart forgets them.
	LeaseStore LeaseStore
	LeaseFile  string
	// HoldFile keeps the addresses clients DECLINEd (held back for 10
	// minutes) across restarts; normally in the data directory. Empty:
	// in memory only. Full mode only.
	HoldFile string

	// Peers, when set, names the other servers answering DHCP on this LAN
	// from the same lease store. The server then answers only the
	// clients RFC 3074 load balancing gives it (balance.go), and in full
	// mode rereads the store's leases and starts its search for free
	// addresses in its own part of the range. Nil: it answers everyone.
	Peers Peers

	Plan     pxe.PlanConfig // boot files; Plan.HTTPBase is needed for iPXE and HTTP boot
	Machines Machines       // default: no reservations, every machine boots
	Observer Observer       // optional
	// HostName, if set, is the inventory name of mac ("" for none), sent
	// in full mode as option 12 and, when the client sends option 81, in
	// the server's option 81 (RFC 4702). It is called per reply, so it
	// must be an in-memory lookup.
	HostName func(mac net.HardwareAddr) string
	Logger   *slog.Logger // default: discard

	// OnReply, if set, is called after each reply is sent. It must not block.
	OnReply func(Reply)

	// Port is the DHCP server port; default 67. Tests use a high port. The
	// PXE boot server port is always Port+3944 (4011 for 67).
	Port int
}

// check fills defaults that need no OS access and validates the config.
func (c *Config) check() error {
	if c.Interface == "" {
		return fmt.Errorf("dhcp: no interface configured; set interface to the LAN the machines boot on (e.g. br0)")
	}
	if c.ServerIP.To4() == nil {
		return fmt.Errorf("dhcp: server IP %v is not an IPv4 address; set server_ip or give %s an IPv4 address", c.ServerIP, c.Interface)
	}
	c.ServerIP = c.ServerIP.To4()
	if c.Port == 0 {
		c.Port = 67
	}
	if c.Machines == nil {
		c.Machines = StaticMachines{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Mode == ModeProxy {
		return nil
	}
	if c.Mode != ModeFull {
		return fmt.Errorf("dhcp: unknown mode %d; want full or proxy", c.Mode)
	}
	if len(c.Netmask) != 4 {
		return fmt.Errorf("dhcp: netmask %v is not an IPv4 mask; set the interface's prefix length", c.Netmask)
	}
	if ones, bits := c.Netmask.Size(); bits == 0 || ones == 0 {
		return fmt.Errorf("dhcp: netmask %v is not a valid contiguous mask", net.IP(c.Netmask))
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.LeaseTime < MinLeaseTime || c.LeaseTime > MaxLeaseTime {
		return fmt.Errorf("dhcp: lease time %v out of range; want %v to %v", c.LeaseTime, MinLeaseTime, MaxLeaseTime)
	}
	s, e := c.RangeStart.To4(), c.RangeEnd.To4()
	if s == nil || e == nil {
		return fmt.Errorf("dhcp: range %v-%v is not two IPv4 addresses; set dhcp.range like 10.213.0.100-10.213.0.200", c.RangeStart, c.RangeEnd)
	}
	if ip2u(s) > ip2u(e) {
		return fmt.Errorf("dhcp: range start %v is after range end %v; swap them", s, e)
	}
	subnet := &net.IPNet{IP: c.ServerIP.Mask(c.Netmask), Mask: c.Netmask}
	if !subnet.Contains(s) || !subnet.Contains(e) {
		return fmt.Errorf("dhcp: range %v-%v is not inside the server's subnet %v; pick a range on %s's network", s, e, subnet, c.Interface)
	}
	c.RangeStart, c.RangeEnd = s, e
	if c.Router != nil && c.Router.To4() == nil {
		return fmt.Errorf("dhcp: router %v is not an IPv4 address", c.Router)
	}
	for _, d := range c.DNS {
		if d.To4() == nil {
			return fmt.Errorf("dhcp: DNS server %v is not an IPv4 address", d)
		}
	}
	return nil
}

// fromInterface fills ServerIP and Netmask from the interface when unset.
func (c *Config) fromInterface() error {
	if c.ServerIP != nil && (c.Netmask != nil || c.Mode == ModeProxy) {
		return nil
	}
	ifi, err := net.InterfaceByName(c.Interface)
	if err != nil {
		return fmt.Errorf("dhcp: interface %q: %w; set interface to an existing network interface", c.Interface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return fmt.Errorf("dhcp: addresses of %s: %w", c.Interface, err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil {
			continue
		}
		if c.ServerIP == nil {
			c.ServerIP = n.IP.To4()
		}
		if n.Contains(c.ServerIP) && c.Netmask == nil {
			c.Netmask = n.Mask[len(n.Mask)-4:]
		}
	}
	if c.ServerIP == nil {
		return fmt.Errorf("dhcp: interface %s has no IPv4 address; assign one or set server_ip", c.Interface)
	}
	if c.Netmask == nil && c.Mode == ModeFull {
		return fmt.Errorf("dhcp: server IP %v is not on interface %s, so the netmask is unknown; set server_ip to an address of %s", c.ServerIP, c.Interface, c.Interface)
	}
	return nil
}

// Reply describes one sent reply, for telemetry.
type Reply struct {
	MAC      net.HardwareAddr
	Request  dhcpv4.MessageType // what the client sent
	Type     dhcpv4.MessageType // what we answered: OFFER, ACK, NAK
	Addr     net.IP             // yiaddr; 0.0.0.0 in proxy mode
	BootFile string             // option 67, else the file field; empty when not booted
	// VendorClass is the option 60 the reply carried: "HTTPClient" to UEFI
	// HTTP boot, which ignores an offer without it; "PXEClient" in proxy
	// mode; empty otherwise.
	VendorClass string
	// Took is from the request's arrival to the send, lease commit included.
	Took time.Duration
}

// Reservation pins a MAC to an address and says whether it boots.
type Reservation struct {
	MAC  net.HardwareAddr
	IP   net.IP // nil: no fixed address
	Boot bool
}

// StaticMachines is a simple in-memory Machines: the listed reservations, and
// every other machine boots with no fixed address.
type StaticMachines []Reservation

// Lookup implements Machines.
func (m StaticMachines) Lookup(mac net.HardwareAddr) (net.IP, bool) {
	for _, r := range m {
		if bytes.Equal(r.MAC, mac) {
			return r.IP, r.Boot
		}
	}
	return nil, true
}

// ReservedFor implements Machines.
func (m StaticMachines) ReservedFor(ip net.IP) net.HardwareAddr {
	for _, r := range m {
		if r.IP != nil && r.IP.Equal(ip) {
			return r.MAC
		}
	}
	return nil
}

func ip2u(ip net.IP) uint32 { return binary.BigEndian.Uint32(ip.To4()) }

func u2ip(u uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, u)
	return ip
}
