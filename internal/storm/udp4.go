package storm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// A DHCP client without an address sends and receives whole IPv4 packets
// on a packet socket, so the UDP and IPv4 headers are built and read here.

// UDP4 is one UDP datagram over IPv4.
type UDP4 struct {
	Src, Dst netip.AddrPort
	Payload  []byte // aliases the parsed buffer
}

// ErrNotUDP4 is wrapped by ParseUDP4 for packets that are not a whole,
// unfragmented IPv4 UDP datagram.
var ErrNotUDP4 = errors.New("not an IPv4 UDP datagram")

const (
	ipv4HeaderLen = 20
	udpHeaderLen  = 8
	protoUDP      = 17
)

// AppendUDP4 appends an IPv4 header (no options, TTL 64, DF clear) and a
// UDP header with checksum, then payload:
//
//	+-------+-------+-------+-------+
//	|ver|ihl|  tos  |  total length |
//	|  identification |flags|frag   |
//	|  ttl  | proto | header cksum  |
//	|        source address         |
//	|      destination address      |
//	+-------+-------+-------+-------+
//	|  src port     |  dst port     |
//	|  length       |  checksum     |
//	+-------+-------+-------+-------+
func AppendUDP4(b []byte, src, dst netip.AddrPort, payload []byte) []byte {
	total := ipv4HeaderLen + udpHeaderLen + len(payload)
	start := len(b)
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(total))
	b = append(b, 0, 0, 0, 0, 64, protoUDP, 0, 0)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	b = append(b, s4[:]...)
	b = append(b, d4[:]...)
	binary.BigEndian.PutUint16(b[start+10:], ^checksum(0, b[start:start+ipv4HeaderLen]))
	u := len(b)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint16(b, uint16(udpHeaderLen+len(payload)))
	b = append(b, 0, 0)
	b = append(b, payload...)
	sum := pseudoSum(s4, d4, udpHeaderLen+len(payload))
	c := ^checksum(sum, b[u:])
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(b[u+6:], c)
	return b
}

// ParseUDP4 decodes an IPv4 packet carrying UDP. It checks the lengths
// and the IPv4 header checksum; a UDP checksum is not checked, as the
// kernel has already done so for packets it received on the wire.
func ParseUDP4(b []byte) (UDP4, error) {
	if len(b) < ipv4HeaderLen {
		return UDP4{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrNotUDP4, len(b), ipv4HeaderLen)
	}
	if b[0]>>4 != 4 {
		return UDP4{}, fmt.Errorf("%w: IP version %d", ErrNotUDP4, b[0]>>4)
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < ipv4HeaderLen || total < ihl+udpHeaderLen || total > len(b) {
		return UDP4{}, fmt.Errorf("%w: header length %d, total length %d in %d bytes", ErrNotUDP4, ihl, total, len(b))
	}
	if b[9] != protoUDP {
		return UDP4{}, fmt.Errorf("%w: protocol %d", ErrNotUDP4, b[9])
	}
	if frag := binary.BigEndian.Uint16(b[6:]); frag&0x3fff != 0 {
		return UDP4{}, fmt.Errorf("%w: a fragment", ErrNotUDP4)
	}
	if checksum(0, b[:ihl]) != 0xffff {
		return UDP4{}, fmt.Errorf("%w: bad IPv4 header checksum", ErrNotUDP4)
	}
	u := b[ihl:total]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < udpHeaderLen || ulen > len(u) {
		return UDP4{}, fmt.Errorf("%w: UDP length %d in %d bytes", ErrNotUDP4, ulen, len(u))
	}
	src := netip.AddrFrom4([4]byte(b[12:16]))
	dst := netip.AddrFrom4([4]byte(b[16:20]))
	return UDP4{
		Src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(u)),
		Dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:])),
		Payload: u[udpHeaderLen:ulen],
	}, nil
}

func pseudoSum(src, dst [4]byte, udpLen int) uint32 {
	var sum uint32
	sum += uint32(src[0])<<8 | uint32(src[1])
	sum += uint32(src[2])<<8 | uint32(src[3])
	sum += uint32(dst[0])<<8 | uint32(dst[1])
	sum += uint32(dst[2])<<8 | uint32(dst[3])
	sum += protoUDP + uint32(udpLen)
	return sum
}

// checksum is the one's-complement sum of b (RFC 1071), folded, added to
// initial; the caller complements it.
func checksum(initial uint32, b []byte) uint16 {
	sum := initial
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}
