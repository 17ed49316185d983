package dhcp6

import (
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Process is process with the clock set to now, for tests outside the
// package (which may import the inventory, as this package may not).
func (s *Server) Process(b []byte, peer net.IP, now time.Time) (*dhcpv6.Message, string) {
	s.now = func() time.Time { return now }
	return s.process(b, peer)
}
