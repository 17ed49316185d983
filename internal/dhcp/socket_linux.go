package dhcp

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rcvBuf is the socket receive buffer asked for: a few seconds of a
// thousand packets a second.
const rcvBuf = 4 << 20

// listenUDP opens 0.0.0.0:port bound to one interface. SO_BINDTODEVICE lets
// several servers (or a TFTP/DHCP pair of instances) each own port 67 on a
// different interface, and makes broadcasts leave through the right one;
// SO_BROADCAST is needed to send to 255.255.255.255.
func listenUDP(ctx context.Context, iface string, port int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, 1); serr != nil {
					return
				}
			}
			if serr = unix.BindToDevice(int(fd), iface); serr != nil {
				serr = fmt.Errorf("bind to interface %s: %w (needs root or CAP_NET_RAW, and the interface must exist)", iface, serr)
			}
			// A lab powering on sends DHCP in bursts, and the default buffer
			// (about 200 KiB, some hundred packets) overflows while a lease
			// commit is waiting for its fsync. Best effort: FORCE needs
			// CAP_NET_ADMIN, plain SO_RCVBUF is capped by net.core.rmem_max.
			if serr == nil && unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listen on UDP %d on %s: %w; is another DHCP server (dnsmasq?) using the port, and are we root?", port, iface, err)
	}
	return pc.(*net.UDPConn), nil
}
