package tftp

import (
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// requestReader reads requests from the listening socket and reports the
// local address each one was sent to, so the transfer can answer from the
// same address on a multi-homed host (clients and firmware drop replies from
// another address).
type requestReader interface {
	ReadRequest(b []byte) (n int, local net.IP, remote net.Addr, err error)
}

// newRequestReader uses IP_PKTINFO (IPV6_PKTINFO for an IPv6 socket) when
// conn is a UDP socket bound to the wildcard address; otherwise the
// socket's own address is the answer. On IPv6 this matters even with one
// interface: a host that also takes SLAAC addresses has several in one
// prefix, and EDK II's PXEv6 drops a reply from any but the one it asked.
func newRequestReader(conn net.PacketConn) requestReader {
	var local net.IP
	if ua, ok := conn.LocalAddr().(*net.UDPAddr); ok {
		local = ua.IP
	}
	if uc, ok := conn.(*net.UDPConn); ok && local != nil && local.IsUnspecified() && local.To4() == nil {
		pc := ipv6.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv6.FlagDst, true); err == nil {
			return pktinfo6Reader{pc}
		}
	}
	if uc, ok := conn.(*net.UDPConn); ok && (local == nil || local.IsUnspecified()) {
		pc := ipv4.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv4.FlagDst, true); err == nil {
			return pktinfoReader{pc}
		}
	}
	if local != nil && local.IsUnspecified() {
		local = nil
	}
	return plainReader{conn, local}
}

type pktinfoReader struct{ pc *ipv4.PacketConn }

func (r pktinfoReader) ReadRequest(b []byte) (int, net.IP, net.Addr, error) {
	n, cm, src, err := r.pc.ReadFrom(b)
	var dst net.IP
	if cm != nil {
		dst = cm.Dst
	}
	return n, dst, src, err
}

type pktinfo6Reader struct{ pc *ipv6.PacketConn }

// ReadRequest reports a link-local destination as unknown: binding one
// needs its zone, and there the kernel's choice is the right one anyway.
func (r pktinfo6Reader) ReadRequest(b []byte) (int, net.IP, net.Addr, error) {
	n, cm, src, err := r.pc.ReadFrom(b)
	var dst net.IP
	if cm != nil && !cm.Dst.IsLinkLocalUnicast() {
		dst = cm.Dst
	}
	return n, dst, src, err
}

type plainReader struct {
	conn  net.PacketConn
	local net.IP
}

func (r plainReader) ReadRequest(b []byte) (int, net.IP, net.Addr, error) {
	n, src, err := r.conn.ReadFrom(b)
	return n, r.local, src, err
}

// dialTransfer opens the transfer's own socket: a fresh port (the server's
// transfer ID), bound to the address the request arrived on, connected to
// the client. If that address cannot be bound (a broadcast request, say),
// the kernel picks the source address from the routing table.
func dialTransfer(local net.IP, remote net.Addr) (*net.UDPConn, error) {
	raddr, ok := remote.(*net.UDPAddr)
	if !ok {
		return nil, fmt.Errorf("client address %v is %T, want *net.UDPAddr", remote, remote)
	}
	if local != nil && !local.IsUnspecified() && !local.IsMulticast() && !local.Equal(net.IPv4bcast) {
		if c, err := net.DialUDP("udp", &net.UDPAddr{IP: local}, raddr); err == nil {
			return c, nil
		}
	}
	return net.DialUDP("udp", nil, raddr)
}

// mtuCache maps local IP addresses to the MTU of the interface holding them.
// Listing interfaces is a netlink dump, too slow to repeat for every request
// of a boot storm, so results live for mtuCacheTTL.
type mtuCache struct {
	mu      sync.Mutex
	byIP    map[string]int
	fetched time.Time
}

const mtuCacheTTL = 10 * time.Second

// lookup returns the MTU of the interface that owns ip, or 0 if unknown.
func (c *mtuCache) lookup(ip net.IP) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIP == nil || time.Since(c.fetched) > mtuCacheTTL {
		c.byIP = map[string]int{}
		c.fetched = time.Now()
		ifs, _ := net.Interfaces()
		for _, ifc := range ifs {
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					c.byIP[n.IP.String()] = ifc.MTU
				}
			}
		}
	}
	return c.byIP[ip.String()]
}

// blockSizeForMTU is the largest blksize whose DATA datagram fits in mtu
// without IP fragmentation: IP header (20 for IPv4, 40 for IPv6), UDP header
// (8) and TFTP header (4).
func blockSizeForMTU(mtu int, ip net.IP) int {
	hdr := 20 + 8 + 4
	if ip.To4() == nil {
		hdr = 40 + 8 + 4
	}
	return mtu - hdr
}
