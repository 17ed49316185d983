package agent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// A minimal generic netlink codec: just what NBD_CMD_CONNECT, RECONFIGURE
// and the LINK_DEAD notification need. Netlink is in host byte order
// (binary.NativeEndian).
//
//	nlmsghdr (16 bytes)                    genlmsghdr (4)      attributes
//	+--------+------+-------+-----+-----+  +---+---+-------+  +-------+------+------+---
//	| len 32 |type16|flags16|seq32|pid32|  |cmd|ver|resvd16|  |len 16 |type16| data | pad to 4
//	+--------+------+-------+-----+-----+  +---+---+-------+  +-------+------+------+---

const (
	nlmsgHdrLen  = 16
	genlHdrLen   = 4
	nlaHdrLen    = 4
	nlaFNested   = 0x8000
	nlaTypeMask  = 0x3fff
	nlmsgError   = 2
	nlmsgDone    = 3
	nlmFRequest  = 0x1
	nlmFAck      = 0x4
	genlIDCtrl   = 0x10
	ctrlCmdGetFm = 3

	ctrlAttrFamilyID    = 1
	ctrlAttrFamilyName  = 2
	ctrlAttrMcastGroups = 7
	ctrlAttrMcastName   = 1
	ctrlAttrMcastID     = 2
)

// NBD generic netlink family (include/uapi/linux/nbd-netlink.h).
const (
	nbdFamilyName   = "nbd"
	nbdFamilyVer    = 1
	nbdMcastGroup   = "nbd_mc_group"
	nbdCmdConnect   = 1
	nbdCmdReconfig  = 3
	nbdCmdLinkDead  = 4
	nbdAttrIndex    = 1 // u32
	nbdAttrSize     = 2 // u64
	nbdAttrBlock    = 3 // u64
	nbdAttrTimeout  = 4 // u64 seconds
	nbdAttrSrvFlags = 5 // u64
	nbdAttrSockets  = 7 // nested NBD_SOCK_ITEM { NBD_SOCK_FD u32 }
	nbdAttrDeadConn = 8 // u64 seconds
	nbdSockItem     = 1
	nbdSockFD       = 1
)

// attr is one netlink attribute; nested attributes carry their children
// already encoded in data.
type attr struct {
	typ  uint16
	data []byte
}

func attrU32(t uint16, v uint32) attr {
	return attr{t, binary.NativeEndian.AppendUint32(nil, v)}
}
func attrU64(t uint16, v uint64) attr {
	return attr{t, binary.NativeEndian.AppendUint64(nil, v)}
}
func attrString(t uint16, s string) attr { return attr{t, append([]byte(s), 0)} }
func attrNested(t uint16, children ...attr) attr {
	return attr{t | nlaFNested, appendAttrs(nil, children...)}
}

func appendAttrs(b []byte, attrs ...attr) []byte {
	for _, a := range attrs {
		b = binary.NativeEndian.AppendUint16(b, uint16(nlaHdrLen+len(a.data)))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	return b
}

// genlMessage encodes one request to family with cmd.
func genlMessage(family uint16, flags uint16, seq uint32, cmd, version uint8, attrs ...attr) []byte {
	b := make([]byte, nlmsgHdrLen, 64)
	b = append(b, cmd, version, 0, 0)
	b = appendAttrs(b, attrs...)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], family)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return b
}

// nlMessage is one decoded netlink message.
type nlMessage struct {
	typ   uint16
	flags uint16
	seq   uint32
	body  []byte // after nlmsghdr
}

var errNetlinkShort = errors.New("netlink: truncated message")

// parseMessages splits a datagram into messages.
func parseMessages(b []byte) ([]nlMessage, error) {
	var out []nlMessage
	for len(b) >= nlmsgHdrLen {
		n := int(binary.NativeEndian.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink: message length %d with %d bytes left: %w", n, len(b), errNetlinkShort)
		}
		out = append(out, nlMessage{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			body:  b[nlmsgHdrLen:n],
		})
		n = (n + 3) &^ 3
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	return out, nil
}

// errnoOf returns the error code of an NLMSG_ERROR body (0 is the ACK).
func errnoOf(body []byte) (int32, error) {
	if len(body) < 4 {
		return 0, fmt.Errorf("netlink: error message of %d bytes: %w", len(body), errNetlinkShort)
	}
	return int32(binary.NativeEndian.Uint32(body)), nil
}

// parseAttrs decodes a run of attributes into type -> data (last wins; the
// nested flag is masked off).
func parseAttrs(b []byte) (map[uint16][]byte, error) {
	m := map[uint16][]byte{}
	for len(b) >= nlaHdrLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHdrLen || n > len(b) {
			return m, fmt.Errorf("netlink: attribute length %d with %d bytes left: %w", n, len(b), errNetlinkShort)
		}
		m[binary.NativeEndian.Uint16(b[2:])&nlaTypeMask] = b[nlaHdrLen:n]
		n = (n + 3) &^ 3
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	return m, nil
}

// genlAttrs returns the command and attributes of a generic netlink message body.
func genlAttrs(body []byte) (cmd uint8, attrs map[uint16][]byte, err error) {
	if len(body) < genlHdrLen {
		return 0, nil, fmt.Errorf("netlink: generic message of %d bytes: %w", len(body), errNetlinkShort)
	}
	attrs, err = parseAttrs(body[genlHdrLen:])
	return body[0], attrs, err
}

// familyInfo decodes a CTRL_CMD_NEWFAMILY reply: the family id and the id
// of multicast group group (0 if absent).
func familyInfo(body []byte, group string) (id uint16, mcast uint32, err error) {
	_, attrs, err := genlAttrs(body)
	if err != nil {
		return 0, 0, err
	}
	v := attrs[ctrlAttrFamilyID]
	if len(v) < 2 {
		return 0, 0, errors.New("netlink: family reply without CTRL_ATTR_FAMILY_ID")
	}
	id = binary.NativeEndian.Uint16(v)
	groups := attrs[ctrlAttrMcastGroups]
	for len(groups) >= nlaHdrLen {
		n := int(binary.NativeEndian.Uint16(groups))
		if n < nlaHdrLen || n > len(groups) {
			break
		}
		g, _ := parseAttrs(groups[nlaHdrLen:n])
		if name := g[ctrlAttrMcastName]; len(name) > 0 && string(trimNUL(name)) == group && len(g[ctrlAttrMcastID]) >= 4 {
			mcast = binary.NativeEndian.Uint32(g[ctrlAttrMcastID])
		}
		n = (n + 3) &^ 3
		if n > len(groups) {
			break
		}
		groups = groups[n:]
	}
	return id, mcast, nil
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// kernelBlockSize is the logical block size to give the kernel: the
// server's minimum, but at least 512 (the kernel's smallest) and at most
// 4096 (its largest, PAGE_SIZE on x86). It is not the preferred size: a
// 4096-byte logical block would make file systems with 1 KiB blocks
// (mkfs.ext4 picks those for small images) unmountable.
func kernelBlockSize(e nbd.Negotiated) uint64 {
	return uint64(min(max(e.MinBlock, 512), 4096))
}

// connectAttrs are the attributes of NBD_CMD_CONNECT for socket fd.
func connectAttrs(index uint32, fd int, e nbd.Negotiated, ioTimeoutSeconds, deadConnSeconds uint64) []attr {
	return []attr{
		attrU64(nbdAttrTimeout, ioTimeoutSeconds),
		attrU32(nbdAttrIndex, index),
		attrU64(nbdAttrSize, e.Size),
		attrU64(nbdAttrBlock, kernelBlockSize(e)),
		attrU64(nbdAttrSrvFlags, uint64(e.Flags)),
		attrU64(nbdAttrDeadConn, deadConnSeconds),
		attrNested(nbdAttrSockets, attrNested(nbdSockItem, attrU32(nbdSockFD, uint32(fd)))),
	}
}

func nativeU32(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }
