package tftp

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Protocol limits.
const (
	defaultBlockSize = 512   // RFC 1350
	minBlockSize     = 8     // RFC 2348
	maxBlockSize     = 65464 // RFC 2348
	maxWindowSize    = 65535 // RFC 7440
	minTimeoutOption = 1     // RFC 2349, seconds
	maxTimeoutOption = 255   // RFC 2349, seconds
)

// limits are the server-side bounds that option negotiation applies.
type limits struct {
	maxBlockSize int // after the MTU clamp
	maxWindow    int
	multicast    bool // the server runs RFC 2090 sessions on this address
}

// params are the negotiated transfer parameters.
type params struct {
	blockSize  int
	windowSize int
	timeout    time.Duration // 0: the client did not ask
	oack       []Option      // nil: send no OACK, start with DATA 1
	// multicast: the client asked for RFC 2090 multicast and gets it. The
	// multicast option itself is not in oack: its value names the
	// session's group and this client's role, which only the session knows.
	multicast bool
}

// maxMulticastBlocks bounds the files sent by multicast. A client maps a
// DATA's 16-bit block number into the 65536-block epoch of its own first
// missing block (iPXE does); a late joiner still missing blocks of one
// epoch while the group sends the next would file the data at the wrong
// offset. Larger files go by unicast, which rolls over safely.
const maxMulticastBlocks = 65535

// optionError is a request the server refuses with ERROR 8 (RFC 2347).
type optionError struct{ msg string }

func (e *optionError) Error() string { return e.msg }

// negotiate decides the reply to a request's options. Unknown options are
// ignored, as RFC 2347 requires; for a known option only the first
// occurrence counts. The OACK lists granted options in the order the client
// sent them, under the client's spelling of the name. If the client asked
// for nothing the server understands, there is no OACK and the transfer
// starts with DATA 1 (RFC 2347 section "Option Acknowledgment").
func negotiate(opts []Option, size int64, lim limits) (params, error) {
	p := params{blockSize: defaultBlockSize, windowSize: 1}
	seen := map[string]bool{}
	for _, o := range opts {
		name := strings.ToLower(o.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case "blksize":
			n, err := strconv.Atoi(o.Value)
			if err != nil || n < minBlockSize {
				return params{}, &optionError{fmt.Sprintf("blksize %q invalid: want an integer %d..%d (RFC 2348)", o.Value, minBlockSize, maxBlockSize)}
			}
			// RFC 2348: the server may answer with a smaller value, never a larger one.
			n = min(n, maxBlockSize, lim.maxBlockSize)
			p.blockSize = n
			p.oack = append(p.oack, Option{o.Name, strconv.Itoa(n)})
		case "windowsize":
			n, err := strconv.Atoi(o.Value)
			if err != nil || n < 1 {
				return params{}, &optionError{fmt.Sprintf("windowsize %q invalid: want an integer 1..%d (RFC 7440)", o.Value, maxWindowSize)}
			}
			n = min(n, maxWindowSize, lim.maxWindow)
			p.windowSize = n
			p.oack = append(p.oack, Option{o.Name, strconv.Itoa(n)})
		case "tsize":
			// RRQ carries 0 (RFC 2349); any number asks for the size.
			if _, err := strconv.ParseInt(o.Value, 10, 64); err != nil || size < 0 {
				continue
			}
			p.oack = append(p.oack, Option{o.Name, strconv.FormatInt(size, 10)})
		case "multicast":
			// RFC 2090: the client sends it empty. Granted below, once the
			// file's size in blocks is known.
			p.multicast = lim.multicast
		case "timeout":
			// RFC 2349: a value outside 1..255 is not acknowledged.
			n, err := strconv.Atoi(o.Value)
			if err != nil || n < minTimeoutOption || n > maxTimeoutOption {
				continue
			}
			p.timeout = time.Duration(n) * time.Second
			p.oack = append(p.oack, Option{o.Name, o.Value})
		}
	}
	if p.multicast {
		// RFC 2090 has one master ACK each block; there is no window.
		p.multicast = size >= 0 && size/int64(p.blockSize)+1 <= maxMulticastBlocks
		if p.multicast {
			p.windowSize = 1
			p.oack = slices.DeleteFunc(p.oack, func(o Option) bool { return strings.EqualFold(o.Name, "windowsize") })
		}
	}
	return p, nil
}

// mcastOption is the value of the RFC 2090 "multicast" option in an OACK,
//
//	addr,port,mc
//
// the group's IPv4 address and UDP port, and mc 1 for the master client
// (which ACKs) or 0 for the others (which only listen). An OACK that only
// hands a client the master role may leave addr and port empty (",,1").
type mcastOption struct {
	group  netip.AddrPort // zero when left out
	master bool
}

func (m mcastOption) String() string {
	mc := "0"
	if m.master {
		mc = "1"
	}
	if !m.group.IsValid() {
		return ",," + mc
	}
	return fmt.Sprintf("%s,%d,%s", m.group.Addr(), m.group.Port(), mc)
}

// parseMcastOption decodes an OACK's multicast value (RFC 2090).
func parseMcastOption(v string) (mcastOption, error) {
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return mcastOption{}, fmt.Errorf("%w: multicast option %q has %d fields, want addr,port,mc (RFC 2090)", ErrMalformed, v, len(f))
	}
	var m mcastOption
	switch f[2] {
	case "0":
	case "1":
		m.master = true
	default:
		return mcastOption{}, fmt.Errorf("%w: multicast option %q: mc is %q, want 0 or 1", ErrMalformed, v, f[2])
	}
	if f[0] == "" && f[1] == "" {
		return m, nil
	}
	addr, err := netip.ParseAddr(f[0])
	if err != nil || !addr.Is4() || !addr.IsMulticast() {
		return mcastOption{}, fmt.Errorf("%w: multicast option %q: address %q is not an IPv4 multicast address", ErrMalformed, v, f[0])
	}
	port, err := strconv.ParseUint(f[1], 10, 16)
	if err != nil || port == 0 || strconv.FormatUint(port, 10) != f[1] {
		return mcastOption{}, fmt.Errorf("%w: multicast option %q: port %q, want 1..65535", ErrMalformed, v, f[1])
	}
	m.group = netip.AddrPortFrom(addr, uint16(port))
	return m, nil
}
