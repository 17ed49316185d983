package storm

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// dhcpConn is the one packet socket every emulated machine's DHCP client
// shares. One socket, not one per machine, because each packet socket sees
// every broadcast reply: N sockets would copy each of N machines' replies
// N times. Replies are handed to the machine waiting on their xid.
type dhcpConn struct {
	fd      int
	ifindex int
	closed  atomic.Bool
	done    chan struct{}

	mu      sync.Mutex
	waiters map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4
}

// dstPortFilter accepts unfragmented IPv4 packets of protocol proto to
// port only, so a packet socket does not copy the rest of the storm's
// traffic to user space.
func dstPortFilter(proto uint8, port uint16) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 9, Size: 1},                                 // 0: protocol
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(proto), SkipFalse: 6}, // 1: else reject
		bpf.LoadAbsolute{Off: 6, Size: 2},                                 // 2: flags, fragment offset
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x3fff, SkipTrue: 4},       // 3: a fragment: reject
		bpf.LoadMemShift{Off: 0},                                          // 4: X = IP header length
		bpf.LoadIndirect{Off: 2, Size: 2},                                 // 5: destination port (UDP and TCP alike)
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},  // 6
		bpf.RetConstant{Val: 1 << 18},                                     // 7: accept (a GRO segment may exceed 64 KiB)
		bpf.RetConstant{Val: 0},                                           // 8: reject
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacketSocket returns a packet socket on ifname that receives whole
// IPv4 packets passing filter, with a 200 ms receive timeout so a reader
// loop can notice it should stop.
func openPacketSocket(ifname string, filter []bpf.Instruction, rcvbuf int) (fd, ifindex int, err error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, 0, fmt.Errorf("interface %s: %w", ifname, err)
	}
	prog, err := bpf.Assemble(filter)
	if err != nil {
		return -1, 0, err
	}
	fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return -1, 0, fmt.Errorf("packet socket on %s (needs root or CAP_NET_RAW): %w", ifname, err)
	}
	raw := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		raw[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(raw)), Filter: &raw[0]}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	for _, err := range []error{
		unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf),
		unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}),
	} {
		if err != nil {
			unix.Close(fd)
			return -1, 0, fmt.Errorf("packet socket on %s: %w", ifname, err)
		}
	}
	return fd, ifi.Index, nil
}

func openDHCPConn(ifname string) (*dhcpConn, error) {
	fd, ifindex, err := openPacketSocket(ifname, dstPortFilter(protoUDP, 68), 4<<20)
	if err != nil {
		return nil, fmt.Errorf("DHCP: %w", err)
	}
	c := &dhcpConn{fd: fd, ifindex: ifindex, done: make(chan struct{}),
		waiters: map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4{}}
	go c.readLoop()
	return c, nil
}

// readLoop dispatches replies until Close; the receive timeout lets it
// notice Close within 200 ms.
func (c *dhcpConn) readLoop() {
	defer close(c.done)
	buf := make([]byte, 65536)
	for !c.closed.Load() {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			continue // EAGAIN on timeout, EINTR
		}
		u, err := ParseUDP4(buf[:n])
		if err != nil || u.Dst.Port() != 68 {
			continue
		}
		m, err := dhcpv4.FromBytes(u.Payload)
		if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
			continue
		}
		c.mu.Lock()
		ch := c.waiters[m.TransactionID]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default: // the machine is not keeping up; a retransmission will come
			}
		}
	}
}

// listen registers xid; replies carrying it arrive on the channel until
// the returned function is called.
func (c *dhcpConn) listen(xid dhcpv4.TransactionID) (<-chan *dhcpv4.DHCPv4, func()) {
	ch := make(chan *dhcpv4.DHCPv4, 16)
	c.mu.Lock()
	c.waiters[xid] = ch
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.waiters, xid)
		c.mu.Unlock()
	}
}

// broadcast sends m from 0.0.0.0:68 to 255.255.255.255:67.
func (c *dhcpConn) broadcast(m *dhcpv4.DHCPv4) error {
	pkt := AppendUDP4(nil, netip.AddrPortFrom(netip.IPv4Unspecified(), 68),
		netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), 67), m.ToBytes())
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: c.ifindex, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	if err := unix.Sendto(c.fd, pkt, 0, to); err != nil {
		return fmt.Errorf("send DHCP %v: %w", m.MessageType(), err)
	}
	return nil
}

func (c *dhcpConn) Close() error {
	c.closed.Store(true)
	<-c.done
	return unix.Close(c.fd)
}
