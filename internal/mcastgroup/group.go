package mcastgroup

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DefaultSpace is the space groups are chosen from unless configured.
var DefaultSpace = netip.MustParsePrefix("239.0.0.0/8")

var (
	adminScoped  = netip.MustParsePrefix("239.0.0.0/8")
	ipv4Mcast    = netip.MustParsePrefix("224.0.0.0/4")
	localControl = netip.MustParsePrefix("224.0.0.0/24")
	// wellKnown are groups inside 239/8 that other protocols use on the
	// same segments: SSDP (UPnP) and SLP.
	wellKnown = []netip.Addr{netip.MustParseAddr("239.255.255.250"), netip.MustParseAddr("239.255.255.253")}
)

// maxProbes bounds the search for a usable group from the hashed one: the
// unusable addresses of a space come in runs of at most 256.
const maxProbes = 512

// Errors of ParseSpace; test with errors.Is.
var (
	// ErrNotMulticast: the space is not within IPv4 multicast, 224.0.0.0/4.
	ErrNotMulticast = errors.New("mcastgroup: not an IPv4 multicast space")
	// ErrNotAdminScoped: the space is outside 239.0.0.0/8 and was not
	// asked for explicitly.
	ErrNotAdminScoped = errors.New("mcastgroup: space outside 239.0.0.0/8")
	// ErrNoUsableGroup: every address of the space is one a switch floods
	// or another protocol uses.
	ErrNoUsableGroup = errors.New("mcastgroup: no usable group in space")
)

// Space is a block of multicast addresses groups are chosen from. The zero
// Space is not usable; get one from ParseSpace or NewSpace.
type Space struct {
	prefix netip.Prefix
}

// ParseSpace reads a space as written in a config: a prefix
// ("239.10.0.0/16") or one address ("239.10.0.7", every content to that
// group, which the content id in each datagram keeps apart). Empty means
// DefaultSpace. explicit allows a space outside 239.0.0.0/8.
func ParseSpace(s string, explicit bool) (Space, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return NewSpace(DefaultSpace, explicit)
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Space{}, fmt.Errorf("%w: %q is neither an address nor a prefix: %w", ErrNotMulticast, s, err)
		}
		return NewSpace(netip.PrefixFrom(a, a.BitLen()), explicit)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Space{}, fmt.Errorf("%w: %q is neither an address nor a prefix: %w", ErrNotMulticast, s, err)
	}
	return NewSpace(p, explicit)
}

// NewSpace checks p as a space: IPv4 multicast, outside the local network
// control block 224.0.0.0/24, within 239.0.0.0/8 unless explicit, with at
// least one usable group.
func NewSpace(p netip.Prefix, explicit bool) (Space, error) {
	p = p.Masked()
	switch {
	case !p.IsValid() || !p.Addr().Is4() || !ipv4Mcast.Contains(p.Addr()) || p.Bits() < ipv4Mcast.Bits():
		return Space{}, fmt.Errorf("%w: got %v, want a block within %v, by default %v", ErrNotMulticast, p, ipv4Mcast, DefaultSpace)
	case p.Overlaps(localControl):
		return Space{}, fmt.Errorf("%w: %v overlaps %v, the local network control block every switch floods", ErrNotMulticast, p, localControl)
	case !explicit && (p.Bits() < adminScoped.Bits() || !adminScoped.Contains(p.Addr())):
		return Space{}, fmt.Errorf("%w: got %v; use a block within %v (administratively scoped, RFC 2365), or allow it explicitly", ErrNotAdminScoped, p, adminScoped)
	}
	s := Space{prefix: p}
	if _, ok := s.probe(0); !ok {
		return Space{}, fmt.Errorf("%w: every address of %v is flooded by switches or used by SSDP or SLP; use a larger block", ErrNoUsableGroup, p)
	}
	return s, nil
}

// Prefix is the space's block.
func (s Space) Prefix() netip.Prefix { return s.prefix }

// Group is the group of the content whose sha256 is sum: the same for the
// same content and space on every server.
func (s Space) Group(sum [sha256.Size]byte) netip.Addr {
	a, _ := s.probe(binary.BigEndian.Uint64(sum[:8]))
	return a
}

// probe returns the first usable address at or after the one h picks,
// wrapping within the space; false if maxProbes addresses are unusable.
func (s Space) probe(h uint64) (netip.Addr, bool) {
	size := uint64(1) << (32 - s.prefix.Bits())
	base := binary.BigEndian.Uint32(s.prefix.Addr().AsSlice())
	for i := range min(size, maxProbes) {
		off := (h + i) % size
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+uint32(off))
		if a := netip.AddrFrom4(b); Usable(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Usable reports whether a is a group a storm may use: IPv4 multicast,
// with an Ethernet address no switch floods, and not SSDP's or SLP's.
func Usable(a netip.Addr) bool {
	if !a.Is4() || !ipv4Mcast.Contains(a) {
		return false
	}
	if binary.BigEndian.Uint32(a.AsSlice())&(1<<23-1) < 256 {
		return false
	}
	for _, w := range wellKnown {
		if a == w {
			return false
		}
	}
	return true
}
