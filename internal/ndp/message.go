package ndp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ICMPv6 message types of RFC 4861 section 4.
const (
	TypeRouterSolicitation  = 133
	TypeRouterAdvertisement = 134
)

// HopLimit is the only IPv6 hop limit RFC 4861 allows on its messages: a
// packet that still has 255 was not forwarded by a router, so it was sent on
// this link (section 6.1.1).
const HopLimit = 255

// Option types used here (RFC 4861 section 4.6).
const (
	OptSourceLinkLayer = 1 // source link-layer address (section 4.6.1)
	OptPrefixInfo      = 3 // prefix information (section 4.6.2)
	OptMTU             = 5 // MTU (section 4.6.4)
)

// Errors wrapped by Parse.
var (
	ErrShort  = errors.New("ndp: message too short")
	ErrType   = errors.New("ndp: not a router solicitation or advertisement")
	ErrCode   = errors.New("ndp: ICMPv6 code is not 0")
	ErrOption = errors.New("ndp: malformed option")
)

// Option is one type-length-value option. Data is what follows the type and
// length bytes: the option's whole length (a multiple of 8 bytes) minus 2.
type Option struct {
	Type uint8
	Data []byte
}

// Message is a parsed *RouterSolicitation or *RouterAdvertisement.
type Message interface {
	// Type is the ICMPv6 type, TypeRouterSolicitation or TypeRouterAdvertisement.
	Type() uint8
	// Marshal returns the ICMPv6 message with a zero checksum: on Linux the
	// kernel fills it in for every ICMPv6 raw socket (RFC 3542 section 3.1).
	Marshal() []byte
}

// RouterSolicitation is RFC 4861 section 4.1:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Reserved                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options ...
type RouterSolicitation struct {
	Options []Option
}

// RouterAdvertisement is RFC 4861 section 4.2:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Cur Hop Limit |M|O|  Reserved |       Router Lifetime         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Reachable Time                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Retrans Timer                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options ...
//
// Zero in CurHopLimit, ReachableTime and RetransTimer means "unspecified"
// (hosts keep their own values); RouterLifetime 0 means "not a default
// router" (section 6.3.4).
type RouterAdvertisement struct {
	CurHopLimit    uint8
	Managed        bool   // M: addresses from DHCPv6
	Other          bool   // O: other configuration from DHCPv6
	RouterLifetime uint16 // seconds; 0: do not use this router as default
	ReachableTime  uint32 // milliseconds
	RetransTimer   uint32 // milliseconds
	Options        []Option
}

const (
	rsHeaderLen = 8
	raHeaderLen = 16
	flagM       = 0x80
	flagO       = 0x40
)

// Type is TypeRouterSolicitation.
func (*RouterSolicitation) Type() uint8 { return TypeRouterSolicitation }

// Type is TypeRouterAdvertisement.
func (*RouterAdvertisement) Type() uint8 { return TypeRouterAdvertisement }

// SourceLinkLayer is the first source link-layer address option, or nil.
func (m *RouterSolicitation) SourceLinkLayer() net.HardwareAddr {
	return sourceLinkLayer(m.Options)
}

// SourceLinkLayer is the first source link-layer address option, or nil.
func (m *RouterAdvertisement) SourceLinkLayer() net.HardwareAddr {
	return sourceLinkLayer(m.Options)
}

// sourceLinkLayer reads an Ethernet address (the first 6 bytes of the
// option's data; the rest is padding to 8 bytes, section 4.6.1).
func sourceLinkLayer(opts []Option) net.HardwareAddr {
	for _, o := range opts {
		if o.Type == OptSourceLinkLayer && len(o.Data) >= 6 {
			return net.HardwareAddr(append([]byte(nil), o.Data[:6]...))
		}
	}
	return nil
}

// SourceLinkLayerOption builds the source link-layer address option for mac,
// padded to a multiple of 8 bytes.
func SourceLinkLayerOption(mac net.HardwareAddr) Option {
	n := (2 + len(mac) + 7) / 8 * 8
	d := make([]byte, n-2)
	copy(d, mac)
	return Option{Type: OptSourceLinkLayer, Data: d}
}

// PrefixInfoOption builds a prefix information option (RFC 4861 section
// 4.6.2) for p: L (on-link) and A (autonomous address configuration, RFC
// 4862) as given, both lifetimes life.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |    Length     | Prefix Length |L|A| Reserved1 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Valid Lifetime                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Preferred Lifetime                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Reserved2                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Prefix (16 bytes)                  |
func PrefixInfoOption(p netip.Prefix, onLink, auto bool, life uint32) Option {
	d := make([]byte, 30)
	d[0] = uint8(p.Bits())
	if onLink {
		d[1] |= 0x80
	}
	if auto {
		d[1] |= 0x40
	}
	binary.BigEndian.PutUint32(d[2:], life)
	binary.BigEndian.PutUint32(d[6:], life)
	a := p.Masked().Addr().As16()
	copy(d[14:], a[:])
	return Option{Type: OptPrefixInfo, Data: d}
}

// Marshal encodes the solicitation.
func (m *RouterSolicitation) Marshal() []byte {
	b := make([]byte, rsHeaderLen, rsHeaderLen+optionsLen(m.Options))
	b[0] = TypeRouterSolicitation
	return appendOptions(b, m.Options)
}

// Marshal encodes the advertisement.
func (m *RouterAdvertisement) Marshal() []byte {
	b := make([]byte, raHeaderLen, raHeaderLen+optionsLen(m.Options))
	b[0] = TypeRouterAdvertisement
	b[4] = m.CurHopLimit
	if m.Managed {
		b[5] |= flagM
	}
	if m.Other {
		b[5] |= flagO
	}
	binary.BigEndian.PutUint16(b[6:], m.RouterLifetime)
	binary.BigEndian.PutUint32(b[8:], m.ReachableTime)
	binary.BigEndian.PutUint32(b[12:], m.RetransTimer)
	return appendOptions(b, m.Options)
}

func optionsLen(opts []Option) int {
	n := 0
	for _, o := range opts {
		n += (2 + len(o.Data) + 7) / 8 * 8
	}
	return n
}

// appendOptions writes each option padded with zeros to a multiple of 8
// bytes, as its length field counts units of 8 bytes.
func appendOptions(b []byte, opts []Option) []byte {
	for _, o := range opts {
		n := (2 + len(o.Data) + 7) / 8 * 8
		b = append(b, o.Type, uint8(n/8))
		b = append(b, o.Data...)
		b = append(b, make([]byte, n-2-len(o.Data))...)
	}
	return b
}

// Parse decodes an ICMPv6 router solicitation or advertisement, starting at
// the ICMPv6 type byte (what an ICMPv6 raw socket reads). It checks what the
// message itself can show (RFC 4861 sections 6.1.1 and 6.1.2): code 0, the
// fixed part present, every option of non-zero length and inside the
// message. The checksum is the kernel's job, and the hop limit and source
// address are not in these bytes: the transport checks those. Errors wrap
// ErrShort, ErrType, ErrCode or ErrOption.
func Parse(b []byte) (Message, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, want at least an ICMPv6 header (4)", ErrShort, len(b))
	}
	if b[1] != 0 {
		return nil, fmt.Errorf("%w: got code %d for type %d", ErrCode, b[1], b[0])
	}
	switch b[0] {
	case TypeRouterSolicitation:
		if len(b) < rsHeaderLen {
			return nil, fmt.Errorf("%w: router solicitation of %d bytes, want at least %d", ErrShort, len(b), rsHeaderLen)
		}
		opts, err := parseOptions(b[rsHeaderLen:])
		if err != nil {
			return nil, err
		}
		return &RouterSolicitation{Options: opts}, nil
	case TypeRouterAdvertisement:
		if len(b) < raHeaderLen {
			return nil, fmt.Errorf("%w: router advertisement of %d bytes, want at least %d", ErrShort, len(b), raHeaderLen)
		}
		opts, err := parseOptions(b[raHeaderLen:])
		if err != nil {
			return nil, err
		}
		return &RouterAdvertisement{
			CurHopLimit:    b[4],
			Managed:        b[5]&flagM != 0,
			Other:          b[5]&flagO != 0,
			RouterLifetime: binary.BigEndian.Uint16(b[6:]),
			ReachableTime:  binary.BigEndian.Uint32(b[8:]),
			RetransTimer:   binary.BigEndian.Uint32(b[12:]),
			Options:        opts,
		}, nil
	default:
		return nil, fmt.Errorf("%w: got ICMPv6 type %d, want %d or %d", ErrType, b[0], TypeRouterSolicitation, TypeRouterAdvertisement)
	}
}

// parseOptions splits the options. Their data is copied, so the caller may
// reuse its read buffer.
func parseOptions(b []byte) ([]Option, error) {
	var opts []Option
	for off := 0; off < len(b); {
		if len(b)-off < 2 {
			return nil, fmt.Errorf("%w: %d stray bytes at offset %d, want a type and a length", ErrOption, len(b)-off, off)
		}
		n := int(b[off+1]) * 8
		if n == 0 {
			return nil, fmt.Errorf("%w: option type %d at offset %d has length 0 (RFC 4861 section 4.6: discard the packet)", ErrOption, b[off], off)
		}
		if off+n > len(b) {
			return nil, fmt.Errorf("%w: option type %d at offset %d is %d bytes, only %d left", ErrOption, b[off], off, n, len(b)-off)
		}
		opts = append(opts, Option{Type: b[off], Data: append([]byte(nil), b[off+2:off+n]...)})
		off += n
	}
	return opts, nil
}
