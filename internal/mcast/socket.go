package mcast

import (
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// ListenSender opens the Sender's socket: bound to laddr, where agents
// send their requests, and sending its multicast out of ifi (nil: as the
// routing table says) with the given TTL (0: 1, the default, which keeps
// a storm on its own segment). Loopback of the multicast is off: the
// server's host does not boot from itself.
func ListenSender(laddr netip.AddrPort, ifi *net.Interface, ttl int) (*net.UDPConn, error) {
	if ttl == 0 {
		ttl = 1
	}
	if ttl < 1 || ttl > 255 {
		return nil, fmt.Errorf("mcast: multicast TTL %d, want 1 to 255", ttl)
	}
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(laddr))
	if err != nil {
		return nil, fmt.Errorf("mcast: listen for requests on %v: %w", laddr, err)
	}
	p := ipv4.NewPacketConn(c)
	if err := p.SetMulticastTTL(ttl); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcast: set multicast TTL %d: %w", ttl, err)
	}
	if err := p.SetMulticastLoopback(false); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcast: turn multicast loopback off: %w", err)
	}
	if ifi != nil {
		if err := p.SetMulticastInterface(ifi); err != nil {
			c.Close()
			return nil, fmt.Errorf("mcast: send multicast out of %s: %w", ifi.Name, err)
		}
	}
	return c, nil
}

// groupReadBuffer is the receive buffer asked for the group's socket.
const groupReadBuffer = 4 << 20

// listenGroup opens a socket that receives group's datagrams, joined on
// ifi (nil: the interface the routing table gives the group), and
// returns it with the receive buffer the kernel granted.
func listenGroup(group netip.AddrPort, ifi *net.Interface) (*net.UDPConn, int, error) {
	return listenGroupBuffer(group, ifi, groupReadBuffer)
}

// listenGroupBuffer is listenGroup with a receive buffer of n bytes.
func listenGroupBuffer(group netip.AddrPort, ifi *net.Interface, n int) (*net.UDPConn, int, error) {
	if !group.Addr().Is4() || !group.Addr().IsMulticast() {
		return nil, 0, fmt.Errorf("mcast: group %v, want an IPv4 multicast address", group)
	}
	c, err := net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(group))
	if err != nil {
		return nil, 0, fmt.Errorf("mcast: join %v: %w", group, err)
	}
	got, err := growReadBuffer(c, n)
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("mcast: receive buffer of %d bytes for %v: %w", n, group, err)
	}
	if err := stampDatagrams(c); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("mcast: arrival timestamps and drop counts on the socket of %v: %w", group, err)
	}
	return c, got, nil
}

// stampDatagrams has the kernel note when each datagram arrived
// (SO_TIMESTAMPNS), so a receiver that falls behind its socket can tell
// what arrived before it asked from what is still on its way, and how
// many datagrams the socket had dropped for want of room when it queued
// each one (SO_RXQ_OVFL), so it can tell its own stalls from a lossy
// network.
func stampDatagrams(c *net.UDPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		}
	}); err != nil {
		return err
	}
	return serr
}

// maxBacklog bounds how old a datagram's arrival may be taken to be: a
// wall-clock step between arrival and read must not make it look hours
// old.
const maxBacklog = 10 * time.Second

// arrival is what the kernel said of a datagram beside its bytes.
type arrival struct {
	at time.Time // when it arrived, on the monotonic clock
	// dropped is how many datagrams the socket had dropped, its receive
	// buffer full, when it queued this one; it wraps at 1<<32.
	dropped uint32
}

// readStamped reads one datagram from c into b and returns its length and
// its arrival: when, on the monotonic clock of now (now itself when the
// kernel gave no timestamp), and the socket's drop count (0 until it
// drops one). It allocates nothing.
func readStamped(c *net.UDPConn, b, oob []byte) (int, arrival, error) {
	n, oobn, _, _, err := c.ReadMsgUDPAddrPort(b, oob)
	now := time.Now()
	if err != nil {
		return n, arrival{at: now}, err
	}
	return n, stamps(oob[:oobn], now), nil
}

// stamps reads a datagram's arrival from its control messages, read at
// now.
func stamps(oob []byte, now time.Time) arrival {
	got := arrival{at: now}
	for rest := oob; len(rest) > 0; {
		h, data, more, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			break
		}
		rest = more
		switch {
		case h.Level != unix.SOL_SOCKET:
		case h.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			// The kernel's stamp is wall-clock time; its age, taken against
			// the wall clock now, moves it onto the monotonic clock.
			age := min(max(now.Sub(time.Unix(ts.Unix())), 0), maxBacklog)
			got.at = now.Add(-age)
		case h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			got.dropped = *(*uint32)(unsafe.Pointer(&data[0]))
		}
	}
	return got
}

// stampSpace is the control-message room readStamped needs.
var stampSpace = unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))) + unix.CmsgSpace(4)

// growReadBuffer asks for a receive buffer of n bytes past
// net.core.rmem_max (SO_RCVBUFFORCE, which the agent may use as root):
// Debian's 208 KiB cap holds about 90 datagrams, a few milliseconds of
// the group for a machine whose CPU is busy starting systemd, and every
// datagram lost there costs the whole group a repair. Without the
// privilege it settles for the cap. It returns what the kernel granted.
func growReadBuffer(c *net.UDPConn, n int) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var forced error
	raw.Control(func(fd uintptr) { forced = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) })
	if forced != nil {
		if err := c.SetReadBuffer(n); err != nil {
			return 0, err
		}
	}
	got := 0
	var gerr error
	raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
	return got, gerr
}

// unreadBytes is the size of the next datagram waiting in c's receive
// queue, 0 when none waits or the kernel cannot say.
func unreadBytes(c *net.UDPConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
