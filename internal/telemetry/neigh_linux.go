package telemetry

import (
	"bufio"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// neighbourMAC looks ip up in the kernel's neighbour table: the server
// has just exchanged packets with the client, so on its LAN the entry is
// fresh. It works in proxy DHCP mode too, where bootfleet holds no
// leases. Returns nil when the address is not there (routed clients).
func neighbourMAC(ip net.IP) net.HardwareAddr {
	if ip == nil {
		return nil
	}
	if ip.To4() == nil {
		return neighbour6(ip)
	}
	f, err := os.Open("/proc/net/arp")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseARP(bufio.NewScanner(f), ip.String())
}

// parseARP reads /proc/net/arp lines:
//
//	IP address       HW type     Flags       HW address            Mask     Device
//	10.213.0.100     0x1         0x2         52:54:00:e2:e0:02     *        br0
func parseARP(sc *bufio.Scanner, ip string) net.HardwareAddr {
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != ip || f[2] == "0x0" { // 0x0: incomplete
			continue
		}
		if mac, err := net.ParseMAC(f[3]); err == nil && len(mac) == 6 {
			return mac
		}
	}
	return nil
}

// neighbour6 asks the kernel's IPv6 neighbour table over netlink (there
// is no /proc file for it).
func neighbour6(ip net.IP) net.HardwareAddr {
	b, err := syscall.NetlinkRIB(unix.RTM_GETNEIGH, unix.AF_INET6)
	if err != nil {
		return nil
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil
	}
	for _, m := range msgs {
		if m.Header.Type == unix.RTM_NEWNEIGH {
			if dst, mac := parseNeighbour(m.Data); dst.Equal(ip) && len(mac) == 6 {
				return mac
			}
		}
	}
	return nil
}

// parseNeighbour reads an RTM_NEWNEIGH body: an ndmsg (12 bytes), then
// attributes (length and type, 16 bits each, padded to 4 bytes), of which
// NDA_DST holds the address and NDA_LLADDR the MAC.
func parseNeighbour(b []byte) (dst net.IP, mac net.HardwareAddr) {
	const ndmsgLen = 12
	if len(b) < ndmsgLen {
		return nil, nil
	}
	b = b[ndmsgLen:]
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:])
		if n < 4 || n > len(b) {
			break
		}
		switch typ {
		case unix.NDA_DST:
			dst = net.IP(append([]byte(nil), b[4:n]...))
		case unix.NDA_LLADDR:
			mac = net.HardwareAddr(append([]byte(nil), b[4:n]...))
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return dst, mac
}
