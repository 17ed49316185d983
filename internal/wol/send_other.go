//go:build !linux

package wol

import "syscall"

// broadcastControl cannot bind to a device here; the packet leaves by the
// route to 255.255.255.255.
func broadcastControl(string) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}
}
