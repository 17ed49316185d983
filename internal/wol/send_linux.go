package wol

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// broadcastControl allows broadcast and, when device is set, binds the
// socket to it: a limited broadcast otherwise leaves by the default
// route's interface, which is rarely the boot LAN.
func broadcastControl(device string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
			if serr == nil && device != "" {
				serr = unix.BindToDevice(int(fd), device)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}
