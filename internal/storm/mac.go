package storm

import (
	"fmt"
	"net"
	"strings"
)

// DefaultMACPrefix starts every emulated machine's MAC unless MACPrefix
// says otherwise: locally administered (bit 1 of the first octet) and
// unicast, so it never collides with a NIC's burned-in address.
const DefaultMACPrefix = "02:bf:57"

// MACFor returns machine i's MAC: prefix, then i+1 big-endian in the bytes
// left. The same prefix and index give the same MAC in every run, so a
// repeated run finds its leases and machine records again.
func MACFor(prefix string, i int) (net.HardwareAddr, error) {
	p, err := ParseMACPrefix(prefix)
	if err != nil {
		return nil, err
	}
	free := 6 - len(p)
	if i < 0 || (free < 8 && uint64(i+1) >= 1<<(8*free)) {
		return nil, fmt.Errorf("mac prefix %s leaves %d bytes, too few for machine %d", prefix, free, i+1)
	}
	mac := make(net.HardwareAddr, 6)
	copy(mac, p)
	n := uint64(i + 1)
	for j := 5; j >= len(p); j-- {
		mac[j] = byte(n)
		n >>= 8
	}
	return mac, nil
}

// ParseMACPrefix reads 1 to 5 colon-separated hex octets whose first is a
// locally administered unicast octet.
func ParseMACPrefix(s string) ([]byte, error) {
	n := len(strings.Split(s, ":"))
	mac, err := net.ParseMAC(s + strings.Repeat(":00", max(0, 6-n)))
	if err != nil || len(mac) != 6 || n > 5 {
		return nil, fmt.Errorf("mac prefix %q: want 1 to 5 hex octets like %s", s, DefaultMACPrefix)
	}
	if mac[0]&0x02 == 0 || mac[0]&0x01 != 0 {
		return nil, fmt.Errorf("mac prefix %q: first octet %#02x must be locally administered unicast (second-lowest bit set, lowest clear), e.g. 02", s, mac[0])
	}
	return mac[:n], nil
}
