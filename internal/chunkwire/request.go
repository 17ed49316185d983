package chunkwire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Flags of a Request.
const (
	// FlagRepair says the agent asks for fragments the server has sent and
	// the agent lost. The server sends them even if it sent them a moment
	// ago, which it otherwise skips because they are still in flight.
	FlagRepair uint16 = 1 << 0
	// FlagReadAhead says the agent has not read the chunks yet and only
	// expects to: the server sends them behind every chunk an agent is
	// waiting on, and does not learn the content's read order from them.
	// A sender older than the flag refuses the request, which costs only
	// the read-ahead.
	FlagReadAhead uint16 = 1 << 1

	knownFlags = FlagRepair | FlagReadAhead
)

// Range asks for Count chunks from First, and of each the fragments whose
// bit is set in Mask (bit i for fragment i; AllFragments for all).
type Range struct {
	First, Count uint32
	Mask         uint32
}

// Last is the last chunk of the range.
func (r Range) Last() uint32 { return r.First + r.Count - 1 }

// Request is what an agent sends the server by unicast: the chunks it
// wants, in the order it wants them. A Request with no ranges is a hello,
// answered by an Announce.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|          common header (16 bytes, type 2), see Peek           |
//	+---------------------------------------------------------------+
//	|                         receiver id                           |
//	+-------------------------------+-------------------------------+
//	|             flags             |      range count (0..96)      |
//	+-------------------------------+-------------------------------+
//	|                  range: first chunk                           |
//	+---------------------------------------------------------------+
//	|                  range: chunk count (1..)                     |
//	+---------------------------------------------------------------+
//	|                  range: fragment mask (not 0)                 |
//	+---------------------------------------------------------------+
//	|                  ... more ranges                              |
//	+---------------------------------------------------------------+
//
// The receiver id is a random number an agent picks once, so the server
// can count receivers and tell a slow one from the others.
type Request struct {
	Content  ContentID
	Receiver uint32
	Flags    uint16 // FlagRepair, FlagReadAhead or 0
	Ranges   []Range
}

// Append appends the sealed datagram to dst. It does not check the fields;
// ParseRequest refuses what Append should not have been given.
func (r *Request) Append(dst []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeRequest, r.Content)
	dst = binary.BigEndian.AppendUint32(dst, r.Receiver)
	dst = binary.BigEndian.AppendUint16(dst, r.Flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Ranges)))
	for _, g := range r.Ranges {
		dst = binary.BigEndian.AppendUint32(dst, g.First)
		dst = binary.BigEndian.AppendUint32(dst, g.Count)
		dst = binary.BigEndian.AppendUint32(dst, g.Mask)
	}
	Seal(dst[start:])
	return dst
}

// ParseRequest decodes a Request datagram. Its ranges are appended to
// ranges[:0], so a server that passes the same slice each time decodes
// without allocating.
func ParseRequest(b []byte, ranges []Range) (Request, error) {
	id, err := open(b, TypeRequest)
	if err != nil {
		return Request{}, err
	}
	if len(b) < RequestHeaderLen {
		return Request{}, fmt.Errorf("%w: request of %d bytes, want at least %d", ErrShort, len(b), RequestHeaderLen)
	}
	r := Request{
		Content:  id,
		Receiver: binary.BigEndian.Uint32(b[16:20]),
		Flags:    binary.BigEndian.Uint16(b[20:22]),
	}
	n := int(binary.BigEndian.Uint16(b[22:24]))
	switch {
	case r.Flags&^knownFlags != 0:
		return Request{}, fmt.Errorf("%w: request flags %#04x, known %#04x", ErrMalformed, r.Flags, knownFlags)
	case n > MaxRanges:
		return Request{}, fmt.Errorf("%w: %d ranges, want at most %d", ErrMalformed, n, MaxRanges)
	case len(b) != RequestHeaderLen+n*RangeLen:
		return Request{}, fmt.Errorf("%w: %d ranges take %d bytes, datagram has %d", ErrMalformed, n, RequestHeaderLen+n*RangeLen, len(b))
	}
	r.Ranges = ranges[:0]
	for p := b[RequestHeaderLen:]; len(p) > 0; p = p[RangeLen:] {
		g := Range{
			First: binary.BigEndian.Uint32(p[0:4]),
			Count: binary.BigEndian.Uint32(p[4:8]),
			Mask:  binary.BigEndian.Uint32(p[8:12]),
		}
		switch {
		case g.Count == 0:
			return Request{}, fmt.Errorf("%w: range from chunk %d has no chunks", ErrMalformed, g.First)
		case g.Count-1 > math.MaxUint32-g.First:
			return Request{}, fmt.Errorf("%w: range of %d chunks from %d runs past chunk %d", ErrMalformed, g.Count, g.First, uint32(math.MaxUint32))
		case g.Mask == 0:
			return Request{}, fmt.Errorf("%w: range from chunk %d asks for no fragment", ErrMalformed, g.First)
		}
		r.Ranges = append(r.Ranges, g)
	}
	return r, nil
}
