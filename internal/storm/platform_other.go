//go:build !linux

package storm

import (
	"context"
	"errors"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// The storm needs packet sockets and rtnetlink; elsewhere Run says so.
var errUnsupported = errors.New("bootfleet storm runs on Linux only (packet sockets, rtnetlink)")

type dhcpConn struct{}

func openDHCPConn(string) (*dhcpConn, error) { return nil, errUnsupported }

func (*dhcpConn) listen(dhcpv4.TransactionID) (<-chan *dhcpv4.DHCPv4, func()) { return nil, func() {} }
func (*dhcpConn) broadcast(*dhcpv4.DHCPv4) error                              { return errUnsupported }
func (*dhcpConn) Close() error                                                { return nil }

type addrs struct{}

func openAddrs(string) (*addrs, error)   { return nil, errUnsupported }
func (*addrs) add(netip.Prefix) error    { return errUnsupported }
func (*addrs) remove(netip.Prefix) error { return nil }
func (*addrs) Close() error              { return nil }

func linkSpeed(string) int64 { return 0 }

func Record(context.Context, RecordConfig) (*Trace, RecordStats, error) {
	return nil, RecordStats{}, errUnsupported
}
