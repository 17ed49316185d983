package nbd

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the fixed-size handshake messages.
const (
	GreetingLen          = 18
	ClientFlagsLen       = 4
	OptionHeaderLen      = 16
	OptionReplyHeaderLen = 20
	exportNameReplyLen   = 10
	zeroPadLen           = 124
)

// AppendGreeting appends the server's first message of the fixed newstyle
// handshake:
//
//	 0                   1                   2                   3
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                 "NBDMAGIC" 0x4e42444d41474943                 |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                 "IHAVEOPT" 0x49484156454F5054                 |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| handshake flags (16) |
//	+-------+-------+
func AppendGreeting(b []byte, f HandshakeFlags) []byte {
	b = binary.BigEndian.AppendUint64(b, magicNBD)
	b = binary.BigEndian.AppendUint64(b, magicIHaveOpt)
	return binary.BigEndian.AppendUint16(b, uint16(f))
}

// ParseGreeting is the client side of AppendGreeting.
func ParseGreeting(b []byte) (HandshakeFlags, error) {
	if len(b) < GreetingLen {
		return 0, fmt.Errorf("greeting: got %d bytes, want %d: %w", len(b), GreetingLen, ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != magicNBD {
		return 0, fmt.Errorf("greeting: got magic %#x, want NBDMAGIC %#x: %w", m, magicNBD, ErrBadMagic)
	}
	if m := binary.BigEndian.Uint64(b[8:]); m != magicIHaveOpt {
		return 0, fmt.Errorf("greeting: got magic %#x, want IHAVEOPT %#x (oldstyle servers are not supported): %w", m, magicIHaveOpt, ErrBadMagic)
	}
	return HandshakeFlags(binary.BigEndian.Uint16(b[16:])), nil
}

// ParseClientFlags decodes the client's 32-bit answer to the greeting:
//
//	+-------+-------+-------+-------+
//	|      client flags (32)        |
//	+-------+-------+-------+-------+
//
// proto.md requires the server to drop a client that sets a flag the server
// did not offer, so offered is the HandshakeFlags the server sent.
func ParseClientFlags(b []byte, offered HandshakeFlags) (ClientFlags, error) {
	if len(b) < ClientFlagsLen {
		return 0, fmt.Errorf("client flags: got %d bytes, want %d: %w", len(b), ClientFlagsLen, ErrShort)
	}
	f := ClientFlags(binary.BigEndian.Uint32(b))
	allowed := ClientFixedNewstyle
	if offered&FlagNoZeroes != 0 {
		allowed |= ClientNoZeroes
	}
	if f&^allowed != 0 {
		return f, fmt.Errorf("client flags: got %#x, want a subset of %#x: %w", uint32(f), uint32(allowed), ErrClientFlags)
	}
	return f, nil
}

// OptionHeader is the fixed part of a client option request.
type OptionHeader struct {
	Option Option
	Length uint32 // bytes of option data that follow
}

// ParseOptionHeader decodes the fixed part of an option request:
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                 "IHAVEOPT" 0x49484156454F5054                 |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|          option (32)          |      data length (32)         |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| data ...
func ParseOptionHeader(b []byte) (OptionHeader, error) {
	if len(b) < OptionHeaderLen {
		return OptionHeader{}, fmt.Errorf("option header: got %d bytes, want %d: %w", len(b), OptionHeaderLen, ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != magicIHaveOpt {
		return OptionHeader{}, fmt.Errorf("option header: got magic %#x, want IHAVEOPT %#x: %w", m, magicIHaveOpt, ErrBadMagic)
	}
	return OptionHeader{
		Option: Option(binary.BigEndian.Uint32(b[8:])),
		Length: binary.BigEndian.Uint32(b[12:]),
	}, nil
}

// AppendOption appends an option request (header and data); see
// ParseOptionHeader for the layout.
func AppendOption(b []byte, o Option, data []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, uint32(o))
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// OptionReplyHeader is the fixed part of a server option reply.
type OptionReplyHeader struct {
	Option Option
	Type   ReplyType
	Length uint32
}

// AppendOptionReply appends an option reply:
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                 reply magic 0x0003e889045565a9                |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|          option (32)          |        reply type (32)        |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|        data length (32)       | data ...
//	+-------+-------+-------+-------+
func AppendOptionReply(b []byte, o Option, t ReplyType, data []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, magicOptReply)
	b = binary.BigEndian.AppendUint32(b, uint32(o))
	b = binary.BigEndian.AppendUint32(b, uint32(t))
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// ParseOptionReplyHeader is the client side of AppendOptionReply.
func ParseOptionReplyHeader(b []byte) (OptionReplyHeader, error) {
	if len(b) < OptionReplyHeaderLen {
		return OptionReplyHeader{}, fmt.Errorf("option reply: got %d bytes, want %d: %w", len(b), OptionReplyHeaderLen, ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != magicOptReply {
		return OptionReplyHeader{}, fmt.Errorf("option reply: got magic %#x, want %#x: %w", m, magicOptReply, ErrBadMagic)
	}
	return OptionReplyHeader{
		Option: Option(binary.BigEndian.Uint32(b[8:])),
		Type:   ReplyType(binary.BigEndian.Uint32(b[12:])),
		Length: binary.BigEndian.Uint32(b[16:]),
	}, nil
}

// AppendExportNameReply appends the server's answer to NBD_OPT_EXPORT_NAME,
// which ends the handshake without an option reply header:
//
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	|                     export size (64)                          |
//	+-------+-------+-------+-------+-------+-------+-------+-------+
//	| transm. flags |  124 zero bytes, left out when both sides
//	+-------+-------+  agreed on NO_ZEROES ...
func AppendExportNameReply(b []byte, size uint64, f TransmissionFlags, noZeroes bool) []byte {
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint16(b, uint16(f))
	if !noZeroes {
		b = append(b, make([]byte, zeroPadLen)...)
	}
	return b
}

// ParseExportNameReply is the client side of AppendExportNameReply; b holds
// at least the first 10 bytes.
func ParseExportNameReply(b []byte) (size uint64, f TransmissionFlags, err error) {
	if len(b) < exportNameReplyLen {
		return 0, 0, fmt.Errorf("export name reply: got %d bytes, want %d: %w", len(b), exportNameReplyLen, ErrShort)
	}
	return binary.BigEndian.Uint64(b), TransmissionFlags(binary.BigEndian.Uint16(b[8:])), nil
}
