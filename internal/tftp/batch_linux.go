//go:build linux

package tftp

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GSO limits. The kernel refuses more than UDP_MAX_SEGMENTS segments (64
// since Linux 4.18; newer kernels allow more, 64 works everywhere) and a
// datagram longer than an IP packet can carry; gsoMaxBytes leaves room for
// IPv6 headers below 65535.
const (
	gsoMaxSegments = 64
	gsoMaxBytes    = 65000
)

// mmsgWriter sends DATA on a connected UDP socket with sendmmsg(2): one
// system call per batch instead of one per block. With UDP GSO
// (UDP_SEGMENT, Linux 4.18+) a run of full-size blocks goes down the stack
// as one datagram that the kernel, or the NIC, cuts into blocks at the
// last moment; that is most of the CPU saving. Every DATA packet is two
// iovecs, the 4-byte header and the payload, so payloads can point into
// the shared cache without a copy.
//
// Its arrays are sized once for the transfer's largest batch, so sending
// allocates nothing. Not safe for concurrent use.
type mmsgWriter struct {
	rc   syscall.RawConn
	gso  bool // cleared for good after the kernel refuses a GSO send
	msgs []unix.Mmsghdr
	iovs []unix.Iovec
	oob  []byte
	// first[i] is the index of the first packet in msgs[i], to resume
	// after a refused GSO send.
	first []int
}

var cmsgSpace = unix.CmsgSpace(2)

// newDataWriter returns the DATA writer for a transfer socket whose batches
// hold at most maxPkts packets. useGSO false never tries UDP GSO.
func newDataWriter(c *net.UDPConn, maxPkts int, useGSO bool) (dataWriter, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("raw socket access: %w", err)
	}
	w := &mmsgWriter{
		rc:    rc,
		msgs:  make([]unix.Mmsghdr, maxPkts),
		iovs:  make([]unix.Iovec, 2*maxPkts),
		first: make([]int, maxPkts),
	}
	if useGSO && maxPkts > 1 {
		// Setting the socket default to 0 (off) changes nothing but tells
		// whether this kernel knows UDP_SEGMENT; sizes go per message.
		rc.Control(func(fd uintptr) {
			w.gso = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
		})
		if w.gso {
			w.oob = make([]byte, maxPkts*cmsgSpace)
		}
	}
	return w, nil
}

// errGSORefused reports that the kernel refused a GSO send: no checksum
// offload on the route (EIO), a segment larger than the path MTU (EINVAL),
// or an old kernel. The batch is resent without GSO.
var errGSORefused = errors.New("UDP GSO refused")

func (w *mmsgWriter) writeData(pkts []dataPacket) error {
	for len(pkts) > 0 {
		n := w.build(pkts)
		done, err := w.send(n)
		if errors.Is(err, errGSORefused) {
			w.gso = false
			pkts = pkts[done:]
			continue
		}
		return err
	}
	return nil
}

// build fills msgs for pkts and returns how many messages it used. With GSO,
// consecutive packets of the first packet's size form one message, and a
// shorter packet may end it: the kernel allows a short last segment.
func (w *mmsgWriter) build(pkts []dataPacket) int {
	seg := pkts[0].size()
	perMsg := 1
	if w.gso {
		perMsg = min(gsoMaxSegments, gsoMaxBytes/seg)
	}
	nmsg, niov := 0, 0
	for i := 0; i < len(pkts); {
		m := &w.msgs[nmsg]
		*m = unix.Mmsghdr{}
		w.first[nmsg] = i
		iov0, k := niov, 0
		for k < perMsg && i < len(pkts) {
			p := &pkts[i]
			if k > 0 && p.size() > seg {
				break
			}
			w.iovs[niov] = unix.Iovec{Base: &p.hdr[0]}
			w.iovs[niov].SetLen(len(p.hdr))
			niov++
			if len(p.payload) > 0 {
				w.iovs[niov] = unix.Iovec{Base: &p.payload[0]}
				w.iovs[niov].SetLen(len(p.payload))
				niov++
			}
			i, k = i+1, k+1
			if p.size() < seg {
				break // a short block ends the run
			}
		}
		m.Hdr.Iov = &w.iovs[iov0]
		m.Hdr.SetIovlen(niov - iov0)
		if k > 1 {
			oob := w.oob[nmsg*cmsgSpace : (nmsg+1)*cmsgSpace]
			h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
			h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			h.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(seg)
			m.Hdr.Control = &oob[0]
			m.Hdr.SetControllen(cmsgSpace)
		}
		nmsg++
	}
	return nmsg
}

// send writes msgs[:n]. It returns how many packets went out before an
// errGSORefused, so the caller can resend the rest without GSO. A message
// dropped locally (see isTransient) is skipped, like a datagram lost on the
// wire.
func (w *mmsgWriter) send(n int) (int, error) {
	defer runtime.KeepAlive(w)
	i := 0
	for i < n {
		var sent int
		var errno syscall.Errno
		err := w.rc.Write(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.msgs[i])), uintptr(n-i), 0, 0, 0)
			sent, errno = int(r), e
			return e != unix.EAGAIN
		})
		if err != nil {
			return w.first[i], fmt.Errorf("sending DATA: %w", err)
		}
		switch {
		case errno == 0:
			i += sent
		case errno == unix.EINTR:
		case w.msgs[i].Hdr.Controllen > 0 && (errno == unix.EIO || errno == unix.EINVAL || errno == unix.ENOPROTOOPT || errno == unix.EOPNOTSUPP):
			return w.first[i], errGSORefused
		case isTransient(errno):
			i++
		default:
			return w.first[i], fmt.Errorf("sending DATA: %w", errno)
		}
	}
	return 0, nil
}
