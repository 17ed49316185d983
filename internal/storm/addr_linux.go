package storm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// addrs adds and removes the machines' leased addresses on the interface
// over rtnetlink, and remembers what it added so Close removes whatever a
// machine could not (an interrupted run).
type addrs struct {
	ifindex int
	ifname  string

	mu    sync.Mutex
	added map[netip.Prefix]int // reference counts: two machines may lease one address from different servers
	// promote is the interface's promote_secondaries before the run, restored by Close.
	promote string
}

func openAddrs(ifname string) (*addrs, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", ifname, err)
	}
	a := &addrs{ifindex: ifi.Index, ifname: ifname, added: map[netip.Prefix]int{}}
	// The first address added in a subnet is its primary; the kernel
	// deletes a primary's secondaries with it unless promote_secondaries
	// is set. Without it the first machine to finish would take every
	// other machine's address away.
	path := "/proc/sys/net/ipv4/conf/" + ifname + "/promote_secondaries"
	if old, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(old)) != "1" {
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			return nil, fmt.Errorf("set %s (keeps machines' addresses when one is removed): %w", path, err)
		}
		a.promote = strings.TrimSpace(string(old))
	}
	return a, nil
}

// add puts p on the interface; an address already there is fine.
func (a *addrs) add(p netip.Prefix) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.added[p] > 0 {
		a.added[p]++
		return nil
	}
	err := a.request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, p)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %v to %s: %w", p, a.ifname, err)
	}
	if err == nil {
		a.added[p]++
	}
	return nil
}

// remove takes p off the interface once its last user is done; addresses
// it did not add are left alone.
func (a *addrs) remove(p netip.Prefix) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.added[p] == 0 {
		return nil
	}
	if a.added[p]--; a.added[p] > 0 {
		return nil
	}
	delete(a.added, p)
	if err := a.request(unix.RTM_DELADDR, 0, p); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("remove %v from %s: %w", p, a.ifname, err)
	}
	return nil
}

// Close removes every address still added and restores promote_secondaries.
func (a *addrs) Close() error {
	a.mu.Lock()
	var errs []error
	for p := range a.added {
		if err := a.request(unix.RTM_DELADDR, 0, p); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("remove %v from %s: %w", p, a.ifname, err))
		}
		delete(a.added, p)
	}
	a.mu.Unlock()
	if a.promote != "" {
		path := "/proc/sys/net/ipv4/conf/" + a.ifname + "/promote_secondaries"
		if err := os.WriteFile(path, []byte(a.promote), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// request sends one RTM_NEWADDR or RTM_DELADDR and waits for its ACK.
func (a *addrs) request(typ uint16, flags uint16, p netip.Prefix) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	ip := p.Addr().As4()
	body := make([]byte, unix.SizeofIfAddrmsg)
	body[0] = unix.AF_INET
	body[1] = byte(p.Bits())
	binary.NativeEndian.PutUint32(body[4:], uint32(a.ifindex))
	body = appendRtattr(body, unix.IFA_LOCAL, ip[:])
	body = appendRtattr(body, unix.IFA_ADDRESS, ip[:])
	if p.Bits() < 31 {
		bcast := p.Masked().Addr().As4()
		host := ^uint32(0) >> p.Bits()
		for i := range 4 {
			bcast[i] |= byte(host >> (24 - 8*i))
		}
		body = appendRtattr(body, unix.IFA_BROADCAST, bcast[:])
	}
	msg := binary.NativeEndian.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	msg = binary.NativeEndian.AppendUint16(msg, typ)
	msg = binary.NativeEndian.AppendUint16(msg, unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	msg = binary.NativeEndian.AppendUint32(msg, 1) // sequence number
	msg = binary.NativeEndian.AppendUint32(msg, 0) // port id: the kernel's
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for range 16 { // the ACK is the first message for our sequence number
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netlink: no answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != 1 || m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return unix.Errno(errno)
			}
			return nil
		}
	}
	return errors.New("netlink: no ACK")
}

func appendRtattr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = append(b, byte(l), byte(l>>8), byte(typ), byte(typ>>8))
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// linkSpeed is the interface's speed in bit/s from sysfs, 0 when the
// driver does not say (veth says 10000 Mbit/s; tun and bridges nothing).
func linkSpeed(ifname string) int64 {
	b, err := os.ReadFile("/sys/class/net/" + ifname + "/speed")
	if err != nil {
		return 0
	}
	mbit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbit <= 0 {
		return 0
	}
	return mbit * 1e6
}
