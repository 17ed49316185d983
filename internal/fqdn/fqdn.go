package fqdn

import (
	"errors"
	"fmt"
	"strings"
)

// Flag bits of both options (RFC 4702 section 2.1, RFC 4704 section 4.1).
// E exists in DHCPv4 only: DHCPv6 always uses the DNS wire encoding.
const (
	FlagS byte = 0x01 // the server updates the A (AAAA) record
	FlagO byte = 0x02 // the server overrode the client's S
	FlagE byte = 0x04 // DHCPv4: the name is in DNS wire encoding
	FlagN byte = 0x08 // DHCPv4: no server updates; DHCPv6 uses FlagN6
	// FlagN6 is the N bit of DHCPv6 option 39, one bit lower than in
	// DHCPv4 because DHCPv6 has no E bit.
	FlagN6 byte = 0x04
)

// Errors the decoders wrap.
var (
	ErrShort = errors.New("fqdn: option too short")
	ErrName  = errors.New("fqdn: malformed domain name")
)

// Option is a decoded client FQDN option.
type Option struct {
	Flags byte
	// Name is the domain name, labels joined by dots, without the root
	// label; empty when the client sent none.
	Name string
	// Partial is true when the name lacks the root label (RFC 4702
	// section 3.1): the client wants the server to complete it.
	Partial bool
}

// DecodeV4 reads the body of DHCPv4 option 81: flags, RCODE1, RCODE2 and
// the name, in DNS wire encoding when the E flag is set, else ASCII.
//
//	+-------+--------+--------+------------------
//	| flags | RCODE1 | RCODE2 | domain name ...
//	+-------+--------+--------+------------------
func DecodeV4(b []byte) (Option, error) {
	if len(b) < 3 {
		return Option{}, fmt.Errorf("%w: got %d bytes, want at least 3 (flags, RCODE1, RCODE2)", ErrShort, len(b))
	}
	o := Option{Flags: b[0]}
	if o.Flags&0xf0 != 0 {
		return o, fmt.Errorf("fqdn: flags %#02x set must-be-zero bits (want only N, E, O, S)", o.Flags)
	}
	name := b[3:]
	if o.Flags&FlagE == 0 {
		// The deprecated ASCII form: the name as text; a trailing dot
		// marks it fully qualified.
		s := string(name)
		for i := 0; i < len(s); i++ {
			if s[i] < 0x21 || s[i] > 0x7e {
				return o, fmt.Errorf("%w: byte %#02x at %d in an ASCII name", ErrName, s[i], i)
			}
		}
		o.Name = strings.TrimSuffix(s, ".")
		o.Partial = s != "" && !strings.HasSuffix(s, ".")
		return o, nil
	}
	var err error
	o.Name, o.Partial, err = decodeName(name)
	return o, err
}

// DecodeV6 reads the body of DHCPv6 option 39: flags and the name in DNS
// wire encoding.
//
//	+-------+------------------
//	| flags | domain name ...
//	+-------+------------------
func DecodeV6(b []byte) (Option, error) {
	if len(b) < 1 {
		return Option{}, fmt.Errorf("%w: got 0 bytes, want at least the flags", ErrShort)
	}
	o := Option{Flags: b[0]}
	if o.Flags&0xf8 != 0 {
		return o, fmt.Errorf("fqdn: flags %#02x set must-be-zero bits (want only N, O, S)", o.Flags)
	}
	var err error
	o.Name, o.Partial, err = decodeName(b[1:])
	return o, err
}

// decodeName reads uncompressed DNS labels (RFC 1035 section 3.1); a name
// without the terminating zero-length label is partial. Compression
// pointers are refused, as RFC 4702 section 2.1 and RFC 4704 section 4.2
// forbid them.
func decodeName(b []byte) (name string, partial bool, err error) {
	if len(b) == 0 {
		return "", false, nil
	}
	var labels []string
	for i := 0; i < len(b); {
		n := int(b[i])
		i++
		switch {
		case n == 0:
			if i != len(b) {
				return "", false, fmt.Errorf("%w: %d bytes after the root label", ErrName, len(b)-i)
			}
			return strings.Join(labels, "."), false, nil
		case n > 63:
			return "", false, fmt.Errorf("%w: label length %d, want at most 63 (compression is not allowed)", ErrName, n)
		case i+n > len(b):
			return "", false, fmt.Errorf("%w: label of %d bytes, %d left", ErrName, n, len(b)-i)
		}
		l := string(b[i : i+n])
		if strings.ContainsAny(l, ".\x00") {
			return "", false, fmt.Errorf("%w: label %q holds a dot or NUL", ErrName, l)
		}
		labels = append(labels, l)
		i += n
	}
	return strings.Join(labels, "."), true, nil
}

// encodeName writes name in DNS wire encoding; a partial name gets no
// root label. The caller passes a valid host name (inventory.CheckHostName).
func encodeName(name string, partial bool) []byte {
	var b []byte
	for _, l := range strings.Split(name, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	if !partial {
		b = append(b, 0)
	}
	return b
}

// Qualified is how the server answers with an inventory name: a name with
// a dot is fully qualified, a single label is partial (the client's
// domain completes it).
func Qualified(name string) (partial bool) { return !strings.Contains(name, ".") }

// ReplyV4 is the body of the server's option 81 answering req with name.
// bootfleet updates no DNS, so (RFC 4702 section 3.2) S is 0, N is 1, O
// says so when the client asked for S, and E and the encoding follow the
// client's. RCODE1 and RCODE2 are 255, as section 2.2 asks of servers.
func ReplyV4(req Option, name string) []byte {
	f := FlagN | req.Flags&FlagE
	if req.Flags&FlagS != 0 {
		f |= FlagO
	}
	b := []byte{f, 255, 255}
	partial := Qualified(name)
	if f&FlagE == 0 {
		if !partial {
			name += "."
		}
		return append(b, name...)
	}
	return append(b, encodeName(name, partial)...)
}

// ReplyV6 is the body of the server's option 39 answering req with name
// (RFC 4704 section 4.2): S 0, N 1, O when the client asked for S.
func ReplyV6(req Option, name string) []byte {
	f := FlagN6
	if req.Flags&FlagS != 0 {
		f |= FlagO
	}
	return append([]byte{f}, encodeName(name, Qualified(name))...)
}
