//go:build !linux

package ndp

import (
	"context"
	"errors"
	"net"

	"golang.org/x/net/ipv6"
)

func listen(context.Context, *net.Interface) (*ipv6.PacketConn, error) {
	return nil, errors.New("answering router solicitations is only implemented on Linux")
}
