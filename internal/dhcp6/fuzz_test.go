package dhcp6

import (
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// FuzzProcess: no datagram makes the server panic, and every reply
// encodes and decodes again.
func FuzzProcess(f *testing.F) {
	f.Add(msg(&testing.T{}, dhcpv6.MessageTypeSolicit, macA, pxe6()...))
	f.Add(msg(&testing.T{}, dhcpv6.MessageTypeSolicit, macA, http6()...))
	f.Add(msg(&testing.T{}, dhcpv6.MessageTypeRequest, macA, ipxe6()...))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newTestServer(t, "fd00:213::10f")
		out, _ := s.process(b, peerA)
		if out == nil {
			return
		}
		if _, err := dhcpv6.FromBytes(out.ToBytes()); err != nil {
			t.Fatalf("reply %s does not decode: %v", out.Summary(), err)
		}
	})
}
