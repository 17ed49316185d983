//go:build !linux

package tftp

import (
	"errors"
	"net"
)

// detachBlocking is Linux-only; elsewhere lockstep transfers stay on the
// runtime's network poller.
func detachBlocking(*net.UDPConn) (lockstepIO, error) {
	return nil, errors.New("blocking lockstep sockets are implemented on Linux only")
}
