package dhcp

import (
	"context"
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzHandle feeds arbitrary bytes through decode, validation and both
// policies, on both ports. Nothing may panic, and every reply must encode
// to a packet that decodes again. Seeds: testdata/fuzz/FuzzHandle, made from
// the firmware captures.
func FuzzHandle(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add(make([]byte, 300), true)
	servers := []*Server{goldenServer(f, ModeFull), goldenServer(f, ModeProxy)}
	peer := &net.UDPAddr{IP: net.IPv4(10, 213, 7, 120), Port: 68}
	f.Fuzz(func(t *testing.T, b []byte, bs bool) {
		for _, s := range servers {
			r, why := s.process(context.Background(), b, peer, bs)
			if r.msg == nil {
				if why == "" {
					t.Fatal("dropped without a reason")
				}
				continue
			}
			if r.dest == nil {
				t.Fatal("reply without destination")
			}
			if _, err := dhcpv4.FromBytes(r.msg.ToBytes()); err != nil {
				t.Fatalf("%s reply does not decode: %v", s.cfg.Mode, err)
			}
		}
	})
}
