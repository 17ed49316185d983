package mtftp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// ErrNotRRQ is a datagram on the request socket that is not a read
// request in octet mode.
var ErrNotRRQ = errors.New("mtftp: not an octet RRQ")

// parseRRQ is the path an MTFTP read request asks for, without the leading
// slashes (iPXE strips one; the TFTP server serves the path either way).
// Options are ignored: MTFTP has none, and a client that sent blksize
// would still get 512-byte blocks, which its bitmap copes with only if it
// did not ask for more, so such a request is refused.
func parseRRQ(b []byte) (string, error) {
	p, err := tftp.ParsePacket(b)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotRRQ, err)
	}
	r, ok := p.(*tftp.Request)
	if !ok || r.Op != tftp.OpRRQ {
		return "", fmt.Errorf("%w: got %v, want RRQ", ErrNotRRQ, p.Opcode())
	}
	if !strings.EqualFold(r.Mode, "octet") {
		return "", fmt.Errorf("%w: mode %q, want octet", ErrNotRRQ, r.Mode)
	}
	for _, o := range r.Options {
		if strings.EqualFold(o.Name, "blksize") {
			return "", fmt.Errorf("%w: option blksize=%s, want none (MTFTP blocks are %d bytes)", ErrNotRRQ, o.Value, BlockSize)
		}
	}
	path := strings.TrimLeft(r.Filename, "/")
	if path == "" {
		return "", fmt.Errorf("%w: empty path %q", ErrNotRRQ, r.Filename)
	}
	return path, nil
}
