//go:build !linux

package dhcp

import (
	"context"
	"errors"
	"net"
)

func listenUDP(context.Context, string, int) (*net.UDPConn, error) {
	return nil, errors.New("the DHCP server needs Linux (SO_BINDTODEVICE)")
}
