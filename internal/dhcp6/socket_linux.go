//go:build linux

package dhcp6

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// allServers is All_DHCP_Relay_Agents_and_Servers (RFC 8415 section 7.1).
var allServers = &net.UDPAddr{IP: net.ParseIP("ff02::1:2")}

// listen opens UDP port on ifname only (SO_BINDTODEVICE) and, when
// multicast, joins ff02::1:2, where clients send.
func listen(ctx context.Context, ifname string, port int, multicast bool) (*net.UDPConn, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("dhcp6: interface %s: %w", ifname, err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.BindToDevice(int(fd), ifname); serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(ctx, "udp6", "[::]:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("dhcp6: listen on UDP port %d of %s: %w (needs root, and IPv6 on the interface)", port, ifname, err)
	}
	if !multicast {
		return pc.(*net.UDPConn), nil
	}
	if err := ipv6.NewPacketConn(pc).JoinGroup(ifc, allServers); err != nil {
		pc.Close()
		return nil, fmt.Errorf("dhcp6: join ff02::1:2 on %s: %w", ifname, err)
	}
	return pc.(*net.UDPConn), nil
}
