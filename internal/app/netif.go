package app

import (
	"fmt"
	"net"
)

// ifaceAddr is the server's IPv4 address and netmask on the DHCP interface.
type ifaceAddr struct {
	IP   net.IP
	Mask net.IPMask
	MTU  int
}

// lookupInterface finds the first IPv4 address of the named interface.
func lookupInterface(name string) (ifaceAddr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return ifaceAddr{}, fmt.Errorf("interface %q: %w (set `interface` to one of: %s)", name, err, interfaceNames())
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return ifaceAddr{}, fmt.Errorf("interface %q: list addresses: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return ifaceAddr{IP: n.IP.To4(), Mask: n.Mask[len(n.Mask)-4:], MTU: ifc.MTU}, nil
		}
	}
	return ifaceAddr{}, fmt.Errorf("interface %q has no IPv4 address; give it one (ip addr add 10.213.0.1/24 dev %s) or pick another interface", name, name)
}

func interfaceNames() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "?"
	}
	s := ""
	for i, ifc := range ifs {
		if i > 0 {
			s += ", "
		}
		s += ifc.Name
	}
	return s
}
