package chunkwire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Announce answers a hello (a Request with no ranges) by unicast: the
// server knows the content, multicasts it to Group as sender Sender, and
// will number its next datagram NextSeq. An agent that gets an Announce and then no Data
// knows the network drops the group, not that the server is down.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|          common header (16 bytes, type 3), see Peek           |
//	+---------------------------------------------------------------+
//	|                  content size in bytes (64)                   |
//	|                                                               |
//	+---------------------------------------------------------------+
//	|                          sender id                            |
//	+---------------------------------------------------------------+
//	|                     next sequence number                      |
//	+-------------------------------+-------------------------------+
//	|          group port           |          reserved (0)         |
//	+-------------------------------+-------------------------------+
//	|     group address (16 bytes; IPv4 as ::ffff:a.b.c.d)          |
//	|                                                               |
//	|                                                               |
//	|                                                               |
//	+---------------------------------------------------------------+
type Announce struct {
	Content ContentID
	Size    int64
	Sender  uint32
	NextSeq uint32
	Group   netip.AddrPort
}

// Append appends the sealed datagram to dst.
func (a *Announce) Append(dst []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeAnnounce, a.Content)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Size))
	dst = binary.BigEndian.AppendUint32(dst, a.Sender)
	dst = binary.BigEndian.AppendUint32(dst, a.NextSeq)
	dst = binary.BigEndian.AppendUint16(dst, a.Group.Port())
	dst = append(dst, 0, 0)
	addr := a.Group.Addr().As16()
	dst = append(dst, addr[:]...)
	Seal(dst[start:])
	return dst
}

// ParseAnnounce decodes an Announce datagram.
func ParseAnnounce(b []byte) (Announce, error) {
	id, err := open(b, TypeAnnounce)
	if err != nil {
		return Announce{}, err
	}
	if len(b) != AnnounceLen {
		return Announce{}, fmt.Errorf("%w: announce of %d bytes, want %d", ErrMalformed, len(b), AnnounceLen)
	}
	size := binary.BigEndian.Uint64(b[16:24])
	port := binary.BigEndian.Uint16(b[32:34])
	addr := netip.AddrFrom16([16]byte(b[36:52])).Unmap()
	switch {
	case size > 1<<62:
		return Announce{}, fmt.Errorf("%w: content size %d, want at most 2^62", ErrMalformed, size)
	case b[34] != 0 || b[35] != 0:
		return Announce{}, fmt.Errorf("%w: reserved bytes %#02x %#02x, want 0", ErrMalformed, b[34], b[35])
	case !addr.IsMulticast() || port == 0:
		return Announce{}, fmt.Errorf("%w: group %v port %d, want a multicast address and a port", ErrMalformed, addr, port)
	}
	return Announce{
		Content: id,
		Size:    int64(size),
		Sender:  binary.BigEndian.Uint32(b[24:28]),
		NextSeq: binary.BigEndian.Uint32(b[28:32]),
		Group:   netip.AddrPortFrom(addr, port),
	}, nil
}
