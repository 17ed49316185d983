//go:build !linux

package nbd

import (
	"net"
	"time"
)

// setUserTimeout is Linux-only; elsewhere keepalive alone detects dead peers.
func setUserTimeout(*net.TCPConn, time.Duration) {}
