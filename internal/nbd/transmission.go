package nbd

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the fixed-size transmission messages.
const (
	RequestLen      = 28
	SimpleReplyLen  = 16
	ChunkHeaderLen  = 20
	offsetDataExtra = 8 // offset field in front of OFFSET_DATA bytes
)

// Request is a transmission request header. For CmdWrite, Length bytes of
// data follow it on the wire.
type Request struct {
	Flags  CmdFlags
	Type   Command
	Handle uint64
	Offset uint64
	Length uint32
}

// ParseRequest decodes a request header:
//
//	 0                   1                   2                   3
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|  magic 0x25609513 (32)        | cmd flags(16) |  type (16)    |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                         handle (64)                           |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                         offset (64)                           |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|         length (32)           | data ... (WRITE only)
//	+-------+-------+-------+-------+
func ParseRequest(b []byte) (Request, error) {
	if len(b) < RequestLen {
		return Request{}, fmt.Errorf("request: got %d bytes, want %d: %w", len(b), RequestLen, ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != magicRequest {
		return Request{}, fmt.Errorf("request: got magic %#x, want %#x: %w", m, magicRequest, ErrBadMagic)
	}
	return Request{
		Flags:  CmdFlags(binary.BigEndian.Uint16(b[4:])),
		Type:   Command(binary.BigEndian.Uint16(b[6:])),
		Handle: binary.BigEndian.Uint64(b[8:]),
		Offset: binary.BigEndian.Uint64(b[16:]),
		Length: binary.BigEndian.Uint32(b[24:]),
	}, nil
}

// AppendRequest appends r in the layout ParseRequest reads (header only).
func AppendRequest(b []byte, r Request) []byte {
	b = binary.BigEndian.AppendUint32(b, magicRequest)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Flags))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Type))
	b = binary.BigEndian.AppendUint64(b, r.Handle)
	b = binary.BigEndian.AppendUint64(b, r.Offset)
	return binary.BigEndian.AppendUint32(b, r.Length)
}

// AppendSimpleReply appends a simple reply header. A successful READ reply
// is followed by the request's Length bytes of data.
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|  magic 0x67446698 (32)        |         error (32)            |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                         handle (64)                           |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
func AppendSimpleReply(b []byte, handle uint64, e Errno) []byte {
	b = binary.BigEndian.AppendUint32(b, magicSimpleReply)
	b = binary.BigEndian.AppendUint32(b, uint32(e))
	return binary.BigEndian.AppendUint64(b, handle)
}

// ParseSimpleReply is the client side of AppendSimpleReply.
func ParseSimpleReply(b []byte) (handle uint64, e Errno, err error) {
	if len(b) < SimpleReplyLen {
		return 0, 0, fmt.Errorf("simple reply: got %d bytes, want %d: %w", len(b), SimpleReplyLen, ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != magicSimpleReply {
		return 0, 0, fmt.Errorf("simple reply: got magic %#x, want %#x: %w", m, magicSimpleReply, ErrBadMagic)
	}
	return binary.BigEndian.Uint64(b[8:]), Errno(binary.BigEndian.Uint32(b[4:])), nil
}

// ChunkHeader is the header of one structured reply chunk.
type ChunkHeader struct {
	Flags  uint16 // ReplyFlagDone on the last chunk
	Type   ChunkType
	Handle uint64
	Length uint32 // payload bytes that follow
}

// AppendChunkHeader appends a structured reply chunk header:
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|  magic 0x668e33ef (32)        |  flags (16)   |  type (16)    |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                         handle (64)                           |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|     payload length (32)       | payload ...
//	+-------+-------+-------+-------+
func AppendChunkHeader(b []byte, h ChunkHeader) []byte {
	b = binary.BigEndian.AppendUint32(b, magicStructuredReply)
	b = binary.BigEndian.AppendUint16(b, h.Flags)
	b = binary.BigEndian.AppendUint16(b, uint16(h.Type))
	b = binary.BigEndian.AppendUint64(b, h.Handle)
	return binary.BigEndian.AppendUint32(b, h.Length)
}

// ParseChunkHeader is the client side of AppendChunkHeader.
func ParseChunkHeader(b []byte) (ChunkHeader, error) {
	if len(b) < ChunkHeaderLen {
		return ChunkHeader{}, fmt.Errorf("reply chunk: got %d bytes, want %d: %w", len(b), ChunkHeaderLen, ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != magicStructuredReply {
		return ChunkHeader{}, fmt.Errorf("reply chunk: got magic %#x, want %#x: %w", m, magicStructuredReply, ErrBadMagic)
	}
	return ChunkHeader{
		Flags:  binary.BigEndian.Uint16(b[4:]),
		Type:   ChunkType(binary.BigEndian.Uint16(b[6:])),
		Handle: binary.BigEndian.Uint64(b[8:]),
		Length: binary.BigEndian.Uint32(b[16:]),
	}, nil
}

// AppendOffsetDataHeader appends the chunk header and offset field of a
// final NBD_REPLY_TYPE_OFFSET_DATA chunk; n bytes of data must follow.
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| chunk header, type 1, length 8+n ...                          |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                         offset (64)                           |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| n bytes of data ...
func AppendOffsetDataHeader(b []byte, handle, offset uint64, n uint32, done bool) []byte {
	h := ChunkHeader{Type: ChunkOffsetData, Handle: handle, Length: offsetDataExtra + n}
	if done {
		h.Flags = ReplyFlagDone
	}
	b = AppendChunkHeader(b, h)
	return binary.BigEndian.AppendUint64(b, offset)
}

// AppendNoneChunk appends the NBD_REPLY_TYPE_NONE chunk that ends a
// successful structured reply without data.
func AppendNoneChunk(b []byte, handle uint64) []byte {
	return AppendChunkHeader(b, ChunkHeader{Flags: ReplyFlagDone, Type: ChunkNone, Handle: handle})
}

// AppendErrorChunk appends a final NBD_REPLY_TYPE_ERROR chunk. msg is cut to
// fit its 16-bit length field.
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| chunk header, type 0x8001, length 6+len(msg) ...              |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|         error (32)            | msg len (16)  | message ...
//	+-------+-------+-------+-------+-------+-------+
func AppendErrorChunk(b []byte, handle uint64, e Errno, msg string) []byte {
	if len(msg) > MaxStringLen {
		msg = msg[:MaxStringLen]
	}
	b = AppendChunkHeader(b, ChunkHeader{Flags: ReplyFlagDone, Type: ChunkError, Handle: handle, Length: uint32(6 + len(msg))})
	b = binary.BigEndian.AppendUint32(b, uint32(e))
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// ParseErrorChunk decodes the payload of an error chunk (see
// AppendErrorChunk).
func ParseErrorChunk(payload []byte) (Errno, string, error) {
	if len(payload) < 6 {
		return 0, "", fmt.Errorf("error chunk: got %d bytes, want at least 6: %w", len(payload), ErrReplyData)
	}
	e := Errno(binary.BigEndian.Uint32(payload))
	n := int(binary.BigEndian.Uint16(payload[4:]))
	if n > len(payload)-6 {
		return 0, "", fmt.Errorf("error chunk: got message length %d, want at most %d: %w", n, len(payload)-6, ErrReplyData)
	}
	if e == 0 {
		return 0, "", fmt.Errorf("error chunk: got error 0, want nonzero: %w", ErrReplyData)
	}
	return e, string(payload[6 : 6+n]), nil
}
