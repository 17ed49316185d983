package tftp

import (
	"fmt"
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
}

// params are the negotiated transfer parameters.
type params struct {
	blockSize  int
	windowSize int
	timeout    time.Duration // 0: the client did not ask
	oack       []Option      // nil: send no OACK, start with DATA 1
}

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
	return p, nil
}
