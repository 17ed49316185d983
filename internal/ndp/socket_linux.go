package ndp

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

var allRouters = &net.IPAddr{IP: net.ParseIP("ff02::2")}

// listen opens an ICMPv6 raw socket that sees only router solicitations and
// advertisements on ifc. SO_BINDTODEVICE keeps other links' packets out;
// joining ff02::2 is what makes solicitations arrive (all-nodes, where
// advertisements go, is joined by every IPv6 interface). Multicast loopback
// is off so we never hear ourselves.
func listen(ctx context.Context, ifc *net.Interface) (*ipv6.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.BindToDevice(int(fd), ifc.Name); serr != nil {
				serr = fmt.Errorf("bind to interface %s: %w", ifc.Name, serr)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(ctx, "ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, fmt.Errorf("open ICMPv6 socket: %w (needs root or CAP_NET_RAW, and IPv6)", err)
	}
	p := ipv6.NewPacketConn(c)
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	steps := []struct {
		what string
		err  error
	}{
		{"set ICMPv6 filter", p.SetICMPFilter(&f)},
		{"ask for hop limit and interface", p.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst|ipv6.FlagInterface, true)},
		{"join ff02::2 (all routers)", p.JoinGroup(ifc, allRouters)},
		{"set multicast interface", p.SetMulticastInterface(ifc)},
		{"set multicast hop limit", p.SetMulticastHopLimit(HopLimit)},
		{"set unicast hop limit", p.SetHopLimit(HopLimit)},
		{"turn off multicast loopback", p.SetMulticastLoopback(false)},
	}
	for _, st := range steps {
		if st.err != nil {
			p.Close()
			return nil, fmt.Errorf("%s on %s: %w", st.what, ifc.Name, st.err)
		}
	}
	return p, nil
}
