package storm

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestUDP4RoundTrip(t *testing.T) {
	src := netip.MustParseAddrPort("0.0.0.0:68")
	dst := netip.MustParseAddrPort("255.255.255.255:67")
	for _, n := range []int{0, 1, 300, 1472} {
		payload := bytes.Repeat([]byte{0xa5}, n)
		b := AppendUDP4(nil, src, dst, payload)
		u, err := ParseUDP4(b)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if u.Src != src || u.Dst != dst || !bytes.Equal(u.Payload, payload) {
			t.Fatalf("%d bytes: got %v -> %v %d bytes", n, u.Src, u.Dst, len(u.Payload))
		}
		// The UDP checksum over the pseudo-header sums to all ones.
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		if c := checksum(pseudoSum(s4, d4, udpHeaderLen+n), b[ipv4HeaderLen:]); c != 0xffff {
			t.Fatalf("%d bytes: UDP checksum does not verify: %#x", n, c)
		}
	}
}

func TestParseUDP4Rejects(t *testing.T) {
	good := AppendUDP4(nil, netip.MustParseAddrPort("10.0.0.1:67"), netip.MustParseAddrPort("10.0.0.2:68"), []byte("hello"))
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"short", good[:10]},
		{"IPv6", mutate(func(b []byte) []byte { b[0] = 0x65; return b })},
		{"TCP", mutate(func(b []byte) []byte { b[9] = 6; return b })},
		{"fragment", mutate(func(b []byte) []byte { b[7] = 1; return b })},
		{"bad header checksum", mutate(func(b []byte) []byte { b[8] = 1; return b })},
		{"total length past the end", mutate(func(b []byte) []byte { return b[:len(b)-1] })},
		{"UDP length past the end", mutate(func(b []byte) []byte { b[25] = 200; return b })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseUDP4(tt.b); !errors.Is(err, ErrNotUDP4) {
				t.Fatalf("err = %v, want ErrNotUDP4", err)
			}
		})
	}
}

func FuzzParseUDP4(f *testing.F) {
	f.Add(AppendUDP4(nil, netip.MustParseAddrPort("10.0.0.1:67"), netip.MustParseAddrPort("255.255.255.255:68"), []byte("offer")))
	f.Add([]byte{0x45, 0, 0, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseUDP4(b)
		if err != nil {
			return
		}
		again, err := ParseUDP4(AppendUDP4(nil, u.Src, u.Dst, u.Payload))
		if err != nil || again.Src != u.Src || again.Dst != u.Dst || !bytes.Equal(again.Payload, u.Payload) {
			t.Fatalf("re-encoded datagram does not parse back: %v", err)
		}
	})
}
