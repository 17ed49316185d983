package chunkwire

import (
	"encoding/binary"
	"fmt"
)

// Flags of a Data datagram.
const (
	// FlagEnd marks the last datagram the server sends of a chunk in one
	// pass over it: a receiver still missing fragments of that chunk then
	// knows they were lost and asks again without waiting for a timer.
	FlagEnd uint8 = 1 << 0
)

// Data is one fragment of one chunk, multicast to the content's group.
// Payload aliases the decoded datagram.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|          common header (16 bytes, type 1), see Peek           |
//	+---------------------------------------------------------------+
//	|                          sender id                            |
//	+---------------------------------------------------------------+
//	|                       sequence number                         |
//	+---------------------------------------------------------------+
//	|                         chunk index                           |
//	+---------------+---------------+-------------------------------+
//	|   fragment    |     flags     |        payload length         |
//	+---------------+---------------+-------------------------------+
//	|           payload (1 to 1024 bytes) ...                       |
//	+---------------------------------------------------------------+
//
// The sender id is a random number a server picks at start. Sequence
// numbers count every datagram one sender sends and wrap at 2^32, so a
// receiver that sees a gap in one sender's numbers knows how many it lost,
// even when two servers of a fleet send the same content to its group or
// a server restarts.
type Data struct {
	Content  ContentID
	Sender   uint32
	Seq      uint32
	Chunk    uint32
	Fragment uint8 // 0 to FragmentsPerChunk-1
	Flags    uint8 // FlagEnd or 0
	Payload  []byte
}

// Offset is where the payload starts in the content.
func (d *Data) Offset() int64 {
	return int64(d.Chunk)*ChunkSize + int64(d.Fragment)*FragmentSize
}

// Append appends the sealed datagram to dst. It does not check the fields;
// ParseData refuses what Append should not have been given.
func (d *Data) Append(dst []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeData, d.Content)
	dst = binary.BigEndian.AppendUint32(dst, d.Sender)
	dst = binary.BigEndian.AppendUint32(dst, d.Seq)
	dst = binary.BigEndian.AppendUint32(dst, d.Chunk)
	dst = append(dst, d.Fragment, d.Flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(d.Payload)))
	dst = append(dst, d.Payload...)
	Seal(dst[start:])
	return dst
}

// ParseData decodes a Data datagram.
func ParseData(b []byte) (Data, error) {
	id, err := open(b, TypeData)
	if err != nil {
		return Data{}, err
	}
	if len(b) < DataHeaderLen {
		return Data{}, fmt.Errorf("%w: data datagram of %d bytes, want at least %d", ErrShort, len(b), DataHeaderLen)
	}
	d := Data{
		Content:  id,
		Sender:   binary.BigEndian.Uint32(b[16:20]),
		Seq:      binary.BigEndian.Uint32(b[20:24]),
		Chunk:    binary.BigEndian.Uint32(b[24:28]),
		Fragment: b[28],
		Flags:    b[29],
	}
	n := int(binary.BigEndian.Uint16(b[30:32]))
	switch {
	case d.Fragment >= FragmentsPerChunk:
		return Data{}, fmt.Errorf("%w: fragment %d, want below %d", ErrMalformed, d.Fragment, FragmentsPerChunk)
	case d.Flags&^FlagEnd != 0:
		return Data{}, fmt.Errorf("%w: data flags %#02x, known %#02x", ErrMalformed, d.Flags, FlagEnd)
	case n == 0 || n > FragmentSize:
		return Data{}, fmt.Errorf("%w: payload length %d, want 1 to %d", ErrMalformed, n, FragmentSize)
	case n != len(b)-DataHeaderLen:
		return Data{}, fmt.Errorf("%w: payload length field %d, datagram carries %d", ErrMalformed, n, len(b)-DataHeaderLen)
	}
	d.Payload = b[DataHeaderLen:]
	return d, nil
}
