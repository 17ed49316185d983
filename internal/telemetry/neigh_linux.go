package telemetry

import (
	"bufio"
	"net"
	"os"
	"strings"
)

// neighbourMAC looks ip up in the kernel's IPv4 neighbour table: the
// server has just exchanged packets with the client, so on its LAN the
// entry is fresh. It works in proxy DHCP mode too, where bootfleet holds
// no leases. Returns nil when the address is not there (routed clients).
func neighbourMAC(ip net.IP) net.HardwareAddr {
	if ip == nil {
		return nil
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
