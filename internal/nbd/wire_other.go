//go:build !linux

package nbd

import "syscall"

func newSocketWire(syscall.RawConn) wire { return nil }
