//go:build !linux

package telemetry

import "net"

// neighbourMAC has no neighbour table to read here; TFTP transfers are
// tied to a machine only through addresses learned from HTTP requests.
func neighbourMAC(net.IP) net.HardwareAddr { return nil }
