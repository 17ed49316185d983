package storm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// A recorder that captures a connection rather than standing in it needs
// no change to the server or the machine's command line: it sees what
// the client sends, and puts the TCP segments back in order itself.

// TCP4 is one captured TCP segment over IPv4.
type TCP4 struct {
	Src, Dst netip.AddrPort
	Seq      uint32
	SYN, FIN bool
	RST      bool
	Payload  []byte // aliases the parsed buffer
}

// ErrNotTCP4 is wrapped by ParseTCP4 for packets that are not a whole,
// unfragmented IPv4 TCP segment.
var ErrNotTCP4 = errors.New("not an IPv4 TCP segment")

const protoTCP = 6

// ParseTCP4 decodes an IPv4 packet carrying TCP. Checksums are not
// checked: a capture sees outgoing packets before the NIC fills them in.
func ParseTCP4(b []byte) (TCP4, error) {
	if len(b) < ipv4HeaderLen || b[0]>>4 != 4 {
		return TCP4{}, fmt.Errorf("%w: not IPv4 (%d bytes)", ErrNotTCP4, len(b))
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	// GRO can hand a capture a segment larger than 64 KiB with total
	// length 0; the captured length counts then.
	if total == 0 {
		total = len(b)
	}
	if ihl < ipv4HeaderLen || total < ihl+20 || total > len(b) {
		return TCP4{}, fmt.Errorf("%w: header length %d, total length %d in %d bytes", ErrNotTCP4, ihl, total, len(b))
	}
	if b[9] != protoTCP {
		return TCP4{}, fmt.Errorf("%w: protocol %d", ErrNotTCP4, b[9])
	}
	if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
		return TCP4{}, fmt.Errorf("%w: a fragment", ErrNotTCP4)
	}
	t := b[ihl:total]
	off := int(t[12]>>4) * 4
	if off < 20 || off > len(t) {
		return TCP4{}, fmt.Errorf("%w: data offset %d in %d bytes", ErrNotTCP4, off, len(t))
	}
	flags := t[13]
	return TCP4{
		Src:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), binary.BigEndian.Uint16(t)),
		Dst:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[16:20])), binary.BigEndian.Uint16(t[2:])),
		Seq:     binary.BigEndian.Uint32(t[4:]),
		FIN:     flags&0x01 != 0,
		SYN:     flags&0x02 != 0,
		RST:     flags&0x04 != 0,
		Payload: t[off:],
	}, nil
}

// maxOutOfOrder bounds the bytes one stream holds while waiting for a gap
// to be filled; the client to server side of NBD is requests, rarely more
// than a few KiB in flight.
const maxOutOfOrder = 8 << 20

// tcpStream puts one direction of a connection back in order.
type tcpStream struct {
	next    uint32 // sequence number of the next byte to deliver
	pending map[uint32][]byte
	held    int
	out     func([]byte) error
}

func newTCPStream(synSeq uint32, out func([]byte) error) *tcpStream {
	return &tcpStream{next: synSeq + 1, pending: map[uint32][]byte{}, out: out}
}

// add takes one segment's payload: delivered if it is next, held if it
// is ahead, and the new part kept if it overlaps what was delivered.
func (s *tcpStream) add(seq uint32, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	d := int32(seq - s.next)
	switch {
	case d < 0: // a retransmission, maybe with new bytes at its end
		if int(-d) >= len(p) {
			return nil
		}
		p, seq = p[-d:], s.next
	case d > 0:
		if _, dup := s.pending[seq]; !dup {
			if s.held+len(p) > maxOutOfOrder {
				return fmt.Errorf("more than %d bytes out of order waiting for byte %d: the capture lost packets", maxOutOfOrder, s.next)
			}
			s.pending[seq] = append([]byte(nil), p...)
			s.held += len(p)
		}
		return nil
	}
	if err := s.out(p); err != nil {
		return err
	}
	s.next = seq + uint32(len(p))
	// Deliver what waited for this; bounded by the map's size.
	for range len(s.pending) + 1 {
		found := false
		for pseq, pp := range s.pending {
			if d := int32(pseq - s.next); d <= 0 {
				delete(s.pending, pseq)
				s.held -= len(pp)
				if int(-d) < len(pp) {
					if err := s.out(pp[-d:]); err != nil {
						return err
					}
					s.next = pseq + uint32(len(pp))
				}
				found = true
			}
		}
		if !found {
			break
		}
	}
	return nil
}
