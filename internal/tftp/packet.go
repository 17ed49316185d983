package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Opcode is the first 16-bit field of every TFTP packet (RFC 1350 section 5,
// RFC 2347 for OACK).
type Opcode uint16

// TFTP opcodes.
const (
	OpRRQ   Opcode = 1
	OpWRQ   Opcode = 2
	OpDATA  Opcode = 3
	OpACK   Opcode = 4
	OpERROR Opcode = 5
	OpOACK  Opcode = 6
)

func (o Opcode) String() string {
	switch o {
	case OpRRQ:
		return "RRQ"
	case OpWRQ:
		return "WRQ"
	case OpDATA:
		return "DATA"
	case OpACK:
		return "ACK"
	case OpERROR:
		return "ERROR"
	case OpOACK:
		return "OACK"
	}
	return fmt.Sprintf("opcode(%d)", uint16(o))
}

// ErrorCode is the code carried by an ERROR packet (RFC 1350 appendix, RFC
// 2347 for code 8).
type ErrorCode uint16

// TFTP error codes.
const (
	ErrCodeNotDefined        ErrorCode = 0
	ErrCodeFileNotFound      ErrorCode = 1
	ErrCodeAccessViolation   ErrorCode = 2
	ErrCodeDiskFull          ErrorCode = 3
	ErrCodeIllegalOperation  ErrorCode = 4
	ErrCodeUnknownTransferID ErrorCode = 5
	ErrCodeFileExists        ErrorCode = 6
	ErrCodeNoSuchUser        ErrorCode = 7
	ErrCodeOptionRefused     ErrorCode = 8
)

// Codec errors. Decoding errors wrap one of these with detail.
var (
	ErrShortPacket   = errors.New("tftp: packet too short")
	ErrUnknownOpcode = errors.New("tftp: unknown opcode")
	ErrMalformed     = errors.New("tftp: malformed packet")
)

// Packet is one decoded TFTP packet: *Request, *Data, *Ack, *Error or *OAck.
type Packet interface {
	Opcode() Opcode
	// Append appends the wire form of the packet to dst.
	Append(dst []byte) []byte
}

// Option is one name/value pair from a request or OACK (RFC 2347). Names are
// compared case-insensitively; the codec keeps them as sent.
type Option struct {
	Name, Value string
}

// Request is an RRQ or WRQ (RFC 1350, options per RFC 2347):
//
//	 2 bytes    string   1 byte  string  1 byte  string  1 byte  string  1 byte
//	+--------+----------+------+--------+------+--------+------+--------+------+
//	| 01/02  | Filename |  0   |  Mode  |  0   |  opt1  |  0   | value1 |  0   | ...
//	+--------+----------+------+--------+------+--------+------+--------+------+
type Request struct {
	Op       Opcode // OpRRQ or OpWRQ
	Filename string
	Mode     string // "octet", "netascii" or "mail", any case
	Options  []Option
}

// Data is a DATA packet (RFC 1350). Payload aliases the decoded buffer.
//
//	 2 bytes   2 bytes    n bytes (0..blksize)
//	+--------+---------+----------+
//	|   03   |  Block  |   Data   |
//	+--------+---------+----------+
type Data struct {
	Block   uint16
	Payload []byte
}

// Ack is an ACK packet (RFC 1350). Block 0 acknowledges an OACK.
//
//	 2 bytes   2 bytes
//	+--------+---------+
//	|   04   |  Block  |
//	+--------+---------+
type Ack struct {
	Block uint16
}

// Error is an ERROR packet (RFC 1350).
//
//	 2 bytes   2 bytes      string    1 byte
//	+--------+-----------+----------+------+
//	|   05   | ErrorCode |  ErrMsg  |   0  |
//	+--------+-----------+----------+------+
type Error struct {
	Code    ErrorCode
	Message string
}

// OAck is an option acknowledgement (RFC 2347).
//
//	 2 bytes   string  1 byte  string  1 byte
//	+--------+--------+------+--------+------+
//	|   06   |  opt1  |  0   | value1 |  0   | ...
//	+--------+--------+------+--------+------+
type OAck struct {
	Options []Option
}

func (r *Request) Opcode() Opcode { return r.Op }
func (*Data) Opcode() Opcode      { return OpDATA }
func (*Ack) Opcode() Opcode       { return OpACK }
func (*Error) Opcode() Opcode     { return OpERROR }
func (*OAck) Opcode() Opcode      { return OpOACK }

func (r *Request) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.Op))
	dst = appendString(dst, r.Filename)
	dst = appendString(dst, r.Mode)
	return AppendOptions(dst, r.Options)
}

func (d *Data) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(OpDATA))
	dst = binary.BigEndian.AppendUint16(dst, d.Block)
	return append(dst, d.Payload...)
}

func (a *Ack) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(OpACK))
	return binary.BigEndian.AppendUint16(dst, a.Block)
}

func (e *Error) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(OpERROR))
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Code))
	return appendString(dst, e.Message)
}

func (o *OAck) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(OpOACK))
	return AppendOptions(dst, o.Options)
}

func (e *Error) Error() string {
	return fmt.Sprintf("tftp error %d: %s", e.Code, e.Message)
}

// putDataHeader writes a DATA header into the first 4 bytes of b; the sender
// fills the payload in place to avoid a copy.
func putDataHeader(b []byte, block uint16) {
	binary.BigEndian.PutUint16(b[0:2], uint16(OpDATA))
	binary.BigEndian.PutUint16(b[2:4], block)
}

// appendString appends s and its NUL terminator. NUL bytes inside s would
// corrupt the framing, so they are dropped.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != 0 {
			dst = append(dst, s[i])
		}
	}
	return append(dst, 0)
}

// AppendOptions appends NUL-terminated name/value pairs.
func AppendOptions(dst []byte, opts []Option) []byte {
	for _, o := range opts {
		dst = appendString(dst, o.Name)
		dst = appendString(dst, o.Value)
	}
	return dst
}

// ParsePacket decodes one datagram. Returned slices and strings do not alias
// b, except Data.Payload, which does.
//
// It is lenient where real clients are sloppy: bytes after an ACK's block
// number are ignored, an ERROR message may lack its NUL, and NUL padding
// after the last option of a request is ignored. It is strict where framing
// is ambiguous: a request must have a NUL-terminated, non-empty filename and
// a NUL-terminated mode, and options must come in complete pairs.
func ParsePacket(b []byte) (Packet, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: got %d bytes, want at least 2 for the opcode", ErrShortPacket, len(b))
	}
	op := Opcode(binary.BigEndian.Uint16(b))
	body := b[2:]
	switch op {
	case OpRRQ, OpWRQ:
		r, err := parseRequest(op, body)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return r, nil
	case OpDATA:
		if len(body) < 2 {
			return nil, fmt.Errorf("%w: DATA of %d bytes, want at least 4", ErrShortPacket, len(b))
		}
		return &Data{Block: binary.BigEndian.Uint16(body), Payload: body[2:]}, nil
	case OpACK:
		if len(body) < 2 {
			return nil, fmt.Errorf("%w: ACK of %d bytes, want 4", ErrShortPacket, len(b))
		}
		return &Ack{Block: binary.BigEndian.Uint16(body)}, nil
	case OpERROR:
		if len(body) < 2 {
			return nil, fmt.Errorf("%w: ERROR of %d bytes, want at least 4", ErrShortPacket, len(b))
		}
		msg := body[2:]
		if i := bytes.IndexByte(msg, 0); i >= 0 {
			msg = msg[:i]
		}
		return &Error{Code: ErrorCode(binary.BigEndian.Uint16(body)), Message: string(msg)}, nil
	case OpOACK:
		opts, err := ParseOptions(body)
		if err != nil {
			return nil, err
		}
		return &OAck{Options: opts}, nil
	}
	return nil, fmt.Errorf("%w: %d (want 1..6)", ErrUnknownOpcode, uint16(op))
}

func parseRequest(op Opcode, body []byte) (*Request, error) {
	name, rest, ok := cutString(body)
	if !ok {
		return nil, fmt.Errorf("%w: %v filename is not NUL-terminated", ErrMalformed, op)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: %v has an empty filename", ErrMalformed, op)
	}
	mode, rest, ok := cutString(rest)
	if !ok {
		return nil, fmt.Errorf("%w: %v mode is missing or not NUL-terminated", ErrMalformed, op)
	}
	if mode == "" {
		return nil, fmt.Errorf("%w: %v has an empty mode", ErrMalformed, op)
	}
	opts, err := ParseOptions(rest)
	if err != nil {
		return nil, err
	}
	return &Request{Op: op, Filename: name, Mode: mode, Options: opts}, nil
}

// ParseOptions decodes NUL-terminated name/value pairs (RFC 2347). Trailing
// NUL padding is ignored; an incomplete pair or an empty name is an error.
func ParseOptions(b []byte) ([]Option, error) {
	var opts []Option
	for len(b) > 0 {
		if allZero(b) {
			break
		}
		name, rest, ok := cutString(b)
		if !ok {
			return nil, fmt.Errorf("%w: option name %q is not NUL-terminated", ErrMalformed, truncate(b))
		}
		if name == "" {
			return nil, fmt.Errorf("%w: empty option name", ErrMalformed)
		}
		value, rest, ok := cutString(rest)
		if !ok {
			return nil, fmt.Errorf("%w: option %q has no NUL-terminated value", ErrMalformed, name)
		}
		opts = append(opts, Option{Name: name, Value: value})
		b = rest
	}
	return opts, nil
}

func cutString(b []byte) (s string, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}
