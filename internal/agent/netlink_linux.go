package agent

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// genlConn is a generic netlink socket bound to the nbd family.
type genlConn struct {
	fd     int
	family uint16
	mcast  uint32 // nbd_mc_group id, 0 if the kernel has none
	seq    uint32
}

// dialNBDNetlink opens a generic netlink socket and resolves the nbd family.
// The family only exists once the nbd module is loaded.
func dialNBDNetlink() (*genlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	// A receive timeout, so a kernel that never answers cannot hang the boot.
	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	c := &genlConn{fd: fd, family: genlIDCtrl}
	var id uint16
	var mc uint32
	err = c.request(ctrlCmdGetFm, 1, []attr{attrString(ctrlAttrFamilyName, nbdFamilyName)}, func(body []byte) error {
		var err error
		id, mc, err = familyInfo(body, nbdMcastGroup)
		return err
	})
	if err != nil {
		c.Close()
		if errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("generic netlink family %q not found (is the nbd module loaded? it must be in /etc/modules): %w", nbdFamilyName, err)
		}
		return nil, err
	}
	c.family, c.mcast = id, mc
	return c, nil
}

func (c *genlConn) Close() error { return unix.Close(c.fd) }

// request sends one command with NLM_F_ACK and reads until the kernel's
// ACK or error, passing every reply body of our family to onReply.
func (c *genlConn) request(cmd, version uint8, attrs []attr, onReply func(body []byte) error) error {
	c.seq++
	seq := c.seq
	msg := genlMessage(c.family, nlmFRequest|nlmFAck, seq, cmd, version, attrs...)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 1<<16)
	for range 100 {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := parseMessages(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue // a multicast notification or a stale reply
			}
			switch m.typ {
			case nlmsgError:
				e, err := errnoOf(m.body)
				if err != nil {
					return err
				}
				if e != 0 {
					return syscall.Errno(-e)
				}
				return nil
			case nlmsgDone:
				return nil
			default:
				if onReply != nil {
					if err := onReply(m.body); err != nil {
						return err
					}
				}
			}
		}
	}
	return errors.New("netlink: no ACK after 100 datagrams")
}

// Connect hands the connected, handshaken socket conn to /dev/nbd<index>
// (NBD_CMD_CONNECT). The kernel takes its own reference to the socket, so
// the caller may close conn afterwards.
func (c *genlConn) Connect(index uint32, conn syscall.Conn, e nbd.Negotiated, ioTimeout, deadConn time.Duration) error {
	return withFD(conn, func(fd int) error {
		err := c.request(nbdCmdConnect, nbdFamilyVer, connectAttrs(index, fd, e, uint64(ioTimeout/time.Second), uint64(deadConn/time.Second)), nil)
		if err != nil {
			return fmt.Errorf("NBD_CMD_CONNECT nbd%d: %w", index, err)
		}
		return nil
	})
}

// Reconfigure gives /dev/nbd<index> a new socket in place of a dead one
// (NBD_CMD_RECONFIGURE with NBD_ATTR_SOCKETS).
func (c *genlConn) Reconfigure(index uint32, conn *net.TCPConn) error {
	return withFD(conn, func(fd int) error {
		err := c.request(nbdCmdReconfig, nbdFamilyVer, []attr{
			attrU32(nbdAttrIndex, index),
			attrNested(nbdAttrSockets, attrNested(nbdSockItem, attrU32(nbdSockFD, uint32(fd)))),
		}, nil)
		if err != nil {
			return fmt.Errorf("NBD_CMD_RECONFIGURE nbd%d: %w", index, err)
		}
		return nil
	})
}

// Subscribe joins the nbd multicast group, after which WaitLinkDead sees
// the kernel's NBD_CMD_LINK_DEAD notifications.
func (c *genlConn) Subscribe() error {
	if c.mcast == 0 {
		return fmt.Errorf("the kernel's nbd family has no %q multicast group", nbdMcastGroup)
	}
	tv := unix.Timeval{} // block: notifications come when they come
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(c.mcast))
}

// WaitLinkDead blocks until the kernel reports a dead link of /dev/nbd<index>.
func (c *genlConn) WaitLinkDead(index uint32) error {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return fmt.Errorf("netlink receive: %w", err)
		}
		msgs, _ := parseMessages(buf[:n])
		for _, m := range msgs {
			if m.typ != c.family {
				continue
			}
			cmd, attrs, err := genlAttrs(m.body)
			if err != nil || cmd != nbdCmdLinkDead {
				continue
			}
			if v := attrs[nbdAttrIndex]; len(v) >= 4 && nativeU32(v) == index {
				return nil
			}
		}
	}
}

// withFD runs f with conn's file descriptor, kept open for the call.
func withFD(conn syscall.Conn, f func(fd int) error) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = raw.Control(func(fd uintptr) {
		// The kernel's NBD client does blocking I/O on the socket; Go's
		// netpoller left it non-blocking, a flag the kernel would honour.
		if ferr = unix.SetNonblock(int(fd), false); ferr == nil {
			ferr = f(int(fd))
		}
	})
	if err != nil {
		return err
	}
	return ferr
}
