//go:build !linux

package dhcp6

import (
	"context"
	"errors"
	"net"
)

func listen(context.Context, string, int, bool) (*net.UDPConn, error) {
	return nil, errors.New("dhcp6: only supported on Linux")
}
