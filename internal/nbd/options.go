package nbd

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// InfoRequest is the data of NBD_OPT_INFO and NBD_OPT_GO.
type InfoRequest struct {
	Name  string     // export name; "" is the default export
	Infos []InfoType // NBD_INFO_* items the client asks for
}

// Requested reports whether the client asked for item t.
func (r InfoRequest) Requested(t InfoType) bool {
	for _, x := range r.Infos {
		if x == t {
			return true
		}
	}
	return false
}

// ParseInfoRequest decodes the data of NBD_OPT_INFO and NBD_OPT_GO:
//
//	+-------+-------+-------+-------+
//	|       name length (32)        |
//	+-------+-------+-------+-------+
//	| name ... (name length bytes)
//	+-------+-------+-------+-------+-------+-------+
//	| n info requests (16)  | info type (16) x n ...
//	+-------+-------+-------+-------+-------+-------+
func ParseInfoRequest(data []byte) (InfoRequest, error) {
	if len(data) < 6 {
		return InfoRequest{}, fmt.Errorf("info request: got %d bytes, want at least 6: %w", len(data), ErrOptionData)
	}
	nameLen := binary.BigEndian.Uint32(data)
	if uint64(nameLen) > uint64(len(data)-6) {
		return InfoRequest{}, fmt.Errorf("info request: got name length %d, want at most %d (option data length - 6): %w", nameLen, len(data)-6, ErrOptionData)
	}
	name := data[4 : 4+nameLen]
	if err := checkString("export name", name); err != nil {
		return InfoRequest{}, err
	}
	rest := data[4+nameLen:]
	n := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != 2*n {
		return InfoRequest{}, fmt.Errorf("info request: got %d bytes of info types, want %d for %d requests: %w", len(rest), 2*n, n, ErrOptionData)
	}
	r := InfoRequest{Name: string(name), Infos: make([]InfoType, n)}
	for i := range n {
		r.Infos[i] = InfoType(binary.BigEndian.Uint16(rest[2*i:]))
	}
	return r, nil
}

// AppendInfoRequest appends r in the layout ParseInfoRequest reads.
func AppendInfoRequest(b []byte, r InfoRequest) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Name)))
	b = append(b, r.Name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Infos)))
	for _, t := range r.Infos {
		b = binary.BigEndian.AppendUint16(b, uint16(t))
	}
	return b
}

// ParseExportName checks the data of NBD_OPT_EXPORT_NAME, which is the
// bare name.
func ParseExportName(data []byte) (string, error) {
	if err := checkString("export name", data); err != nil {
		return "", err
	}
	return string(data), nil
}

// checkString applies proto.md's rules for strings: UTF-8, no NUL, at most
// MaxStringLen bytes.
func checkString(what string, s []byte) error {
	if len(s) > MaxStringLen {
		return fmt.Errorf("%s: got %d bytes, want at most %d: %w", what, len(s), MaxStringLen, ErrOptionData)
	}
	if !utf8.Valid(s) || strings.IndexByte(string(s), 0) >= 0 {
		return fmt.Errorf("%s %q: want UTF-8 without NUL: %w", what, s, ErrOptionData)
	}
	return nil
}

// Info is one NBD_REP_INFO item. Which fields are meaningful depends on Type.
type Info struct {
	Type InfoType

	Size  uint64            // InfoExport
	Flags TransmissionFlags // InfoExport

	MinBlock, PreferredBlock, MaxBlock uint32 // InfoBlockSize

	Text string // InfoName, InfoDescription
}

// AppendInfo appends the data of an NBD_REP_INFO reply:
//
//	NBD_INFO_EXPORT (0):
//	+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+
//	| type (16) = 0 |                  export size (64)                             | flags (16)    |
//	+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+
//	NBD_INFO_NAME (1), NBD_INFO_DESCRIPTION (2):
//	+-------+-------+-------+---
//	| type (16)     | string ... (rest of the reply)
//	+-------+-------+-------+---
//	NBD_INFO_BLOCK_SIZE (3):
//	+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+
//	| type (16) = 3 |      minimum (32)             |     preferred (32)            |      maximum (32)             |
//	+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+
func AppendInfo(b []byte, in Info) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(in.Type))
	switch in.Type {
	case InfoExport:
		b = binary.BigEndian.AppendUint64(b, in.Size)
		b = binary.BigEndian.AppendUint16(b, uint16(in.Flags))
	case InfoBlockSize:
		b = binary.BigEndian.AppendUint32(b, in.MinBlock)
		b = binary.BigEndian.AppendUint32(b, in.PreferredBlock)
		b = binary.BigEndian.AppendUint32(b, in.MaxBlock)
	default:
		b = append(b, in.Text...)
	}
	return b
}

// ParseInfo decodes the data of an NBD_REP_INFO reply (see AppendInfo).
// Unknown types come back with only Type set, as clients must ignore them.
func ParseInfo(data []byte) (Info, error) {
	if len(data) < 2 {
		return Info{}, fmt.Errorf("info reply: got %d bytes, want at least 2: %w", len(data), ErrReplyData)
	}
	in := Info{Type: InfoType(binary.BigEndian.Uint16(data))}
	d := data[2:]
	want := -1
	switch in.Type {
	case InfoExport:
		want = 10
	case InfoBlockSize:
		want = 12
	}
	if want >= 0 && len(d) != want {
		return Info{}, fmt.Errorf("info reply type %d: got %d bytes of data, want %d: %w", in.Type, len(d), want, ErrReplyData)
	}
	switch in.Type {
	case InfoExport:
		in.Size = binary.BigEndian.Uint64(d)
		in.Flags = TransmissionFlags(binary.BigEndian.Uint16(d[8:]))
	case InfoBlockSize:
		in.MinBlock = binary.BigEndian.Uint32(d)
		in.PreferredBlock = binary.BigEndian.Uint32(d[4:])
		in.MaxBlock = binary.BigEndian.Uint32(d[8:])
	case InfoName, InfoDescription:
		in.Text = string(d)
	}
	return in, nil
}

// AppendServerReply appends the data of an NBD_REP_SERVER reply to
// NBD_OPT_LIST:
//
//	+-------+-------+-------+-------+
//	|       name length (32)        |
//	+-------+-------+-------+-------+
//	| name ... | human-readable details ... (rest of the reply)
func AppendServerReply(b []byte, name, details string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	return append(b, details...)
}

// ParseServerReply is the client side of AppendServerReply.
func ParseServerReply(data []byte) (name, details string, err error) {
	if len(data) < 4 {
		return "", "", fmt.Errorf("server reply: got %d bytes, want at least 4: %w", len(data), ErrReplyData)
	}
	n := binary.BigEndian.Uint32(data)
	if uint64(n) > uint64(len(data)-4) {
		return "", "", fmt.Errorf("server reply: got name length %d, want at most %d: %w", n, len(data)-4, ErrReplyData)
	}
	return string(data[4 : 4+n]), string(data[4+n:]), nil
}
