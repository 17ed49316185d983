package storm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/netip"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// iPXE's PXE MTFTP (mtftp://): the group and port are global settings a
// script cannot change, the server's port is the URL's or 1759.
var (
	// MTFTPGroup is where every iPXE listens for every mtftp:// file.
	MTFTPGroup = netip.MustParseAddrPort("239.255.1.1:3001")
)

const (
	mtftpPort      = 1759
	mtftpBlockSize = 512 // the RRQ asks no options
	// mtftpMaxSilent is how many expiries without a peer iPXE takes
	// before it falls back to plain TFTP (MTFTP_MAX_TIMEOUTS): the
	// fourth, as the first request's own expiry counts.
	mtftpMaxSilent = 3
)

// Errors an mtftp fetch ends with, as iPXE's tftp_done gets them.
var (
	ErrMTFTPServer = errors.New("mtftp: server sent ERROR")
	ErrMTFTPData   = errors.New("mtftp: bad DATA")
)

// mtftpPacket is one datagram as a fetch takes it: parsed once, for
// every machine listening on the group.
type mtftpPacket struct {
	src   netip.AddrPort
	op    tftp.Opcode
	block uint16
	data  []byte // DATA's payload, or the whole datagram for ERROR
}

// parseMTFTP reads the opcode and, for DATA, the block; ok is false for
// a datagram too short to have them.
func parseMTFTP(b []byte, src netip.AddrPort) (mtftpPacket, bool) {
	if len(b) < 4 {
		return mtftpPacket{}, false
	}
	p := mtftpPacket{src: src, op: tftp.Opcode(binary.BigEndian.Uint16(b)), data: b}
	if p.op == tftp.OpDATA {
		p.block, p.data = binary.BigEndian.Uint16(b[2:]), b[4:]
	}
	return p, true
}

// mtftpFetch is one machine's mtftp:// download as iPXE runs it
// (net/udp/tftp.c with TFTP_FL_MTFTP_RECOVERY): an RRQ without options
// from a unicast socket, DATA from the group or that socket, the first
// packet's source its peer, blocks kept in a bitmap in any order until
// the short one says where the file ends. Every field below conn is the
// group's (guarded by mtftpGroup.mu): the group's reader updates it for
// each datagram without waking the machine.
type mtftpFetch struct {
	server netip.AddrPort // where RRQs go
	path   string         // as sent: the URL's path without its leading '/'
	open   func() (*net.UDPConn, error)
	w      io.WriterAt // nil: the bytes are counted, not kept
	wake   chan struct{}

	conn   *net.UDPConn   // the unicast socket; a new one on each reopen
	peer   netip.AddrPort // zero until the first packet
	master bool           // a unicast packet came: ACK the first gap
	timer  retryTimer
	silent int // expiries without a peer
	bits   []uint64
	blocks int   // the bitmap's size: (known size)/512 + 1
	size   int64 // the largest end of a block seen
	gap    int   // the first block missing
	done   bool
	err    error
	st     MTFTPStats
}

// MTFTPStats is what one mtftp:// fetch did.
type MTFTPStats struct {
	MulticastBytes int64 `json:"multicast_bytes"` // new blocks' bytes from the group
	UnicastBytes   int64 `json:"unicast_bytes"`   // new blocks' bytes from its own socket
	RRQs           int   `json:"rrqs"`
	Reopens        int   `json:"reopens,omitempty"` // timeouts after a peer: new socket, RRQ again
	Dropped        int   `json:"dropped,omitempty"` // packets from another source than the peer
	FellBack       bool  `json:"fell_back,omitempty"`
}

// receive takes one packet from the group (unicast false) or from the
// fetch's own socket, as iPXE's tftp_rx does.
func (f *mtftpFetch) receive(p mtftpPacket, unicast bool, now time.Time) {
	if f.done {
		return
	}
	if unicast {
		f.master = true // iPXE sets it before it looks at the source
	}
	switch {
	case !f.peer.IsValid():
		f.peer = p.src
	case p.src != f.peer:
		f.st.Dropped++
		return
	}
	switch p.op {
	case tftp.OpDATA:
		f.data(p, unicast, now)
	case tftp.OpERROR:
		msg := "no message"
		if e, err := tftp.ParsePacket(p.data); err == nil {
			msg = e.(*tftp.Error).Error()
		}
		f.finish(fmt.Errorf("%w for %s from %v: %s", ErrMTFTPServer, f.path, p.src, msg))
	case tftp.OpOACK:
		// The server sends none to an RRQ without options; iPXE would
		// take its blksize and tsize, and asks for the next block.
		f.sendPacket(now)
	}
}

// data files one block: its number is 16 bits, extended by the first gap
// as iPXE does, which holds for files under 65535 blocks.
func (f *mtftpFetch) data(p mtftpPacket, unicast bool, now time.Time) {
	base := (f.gap + 1) &^ 0xffff
	if p.block == 0 && base == 0 {
		f.finish(fmt.Errorf("%w: block 0 of %s from %v", ErrMTFTPData, f.path, p.src))
		return
	}
	if len(p.data) > mtftpBlockSize {
		f.finish(fmt.Errorf("%w: block %d of %s has %d bytes, want at most %d", ErrMTFTPData, p.block, f.path, len(p.data), mtftpBlockSize))
		return
	}
	i := base + int(p.block) - 1
	off := int64(i) * mtftpBlockSize
	if f.w != nil {
		if _, err := f.w.WriteAt(p.data, off); err != nil {
			f.finish(fmt.Errorf("mtftp: write %s at %d: %w", f.path, off, err))
			return
		}
	}
	if end := off + int64(len(p.data)); end > f.size {
		f.size = end
		f.blocks = int(end/mtftpBlockSize) + 1
		for len(f.bits)*64 < f.blocks {
			f.bits = append(f.bits, 0)
		}
	}
	if w, b := i/64, uint64(1)<<(i%64); f.bits[w]&b == 0 {
		f.bits[w] |= b
		if unicast {
			f.st.UnicastBytes += int64(len(p.data))
		} else {
			f.st.MulticastBytes += int64(len(p.data))
		}
		for f.gap < f.blocks && f.bits[f.gap/64]&(1<<(f.gap%64)) != 0 {
			f.gap += bits.TrailingZeros64(^(f.bits[f.gap/64] >> (f.gap % 64)))
		}
	}
	f.sendPacket(now)
	if f.gap >= f.blocks {
		f.finish(nil)
	}
}

// sendPacket restarts the timer and sends what iPXE's tftp_send_packet
// does: the RRQ while there is no peer, an ACK of the block before the
// first gap from the master client, nothing otherwise.
func (f *mtftpFetch) sendPacket(now time.Time) {
	f.timer.restart(now)
	switch {
	case !f.peer.IsValid():
		f.st.RRQs++
		rrq := (&tftp.Request{Op: tftp.OpRRQ, Filename: f.path, Mode: "octet"}).Append(nil)
		f.conn.WriteToUDPAddrPort(rrq, f.server) // a lost RRQ is one the timer sends again
	case f.master:
		f.conn.WriteToUDPAddrPort((&tftp.Ack{Block: uint16(f.gap)}).Append(nil), f.peer)
	}
}

// expired handles the timer's expiry and reports whether iPXE falls back
// to plain TFTP now. With a peer it reopens its socket, forgets the peer
// and asks again, keeping its blocks; without one it counts the silence.
func (f *mtftpFetch) expired(now time.Time) (fallBack bool, err error) {
	f.timer.expire() // MTFTP recovery never fails on the timer
	if f.peer.IsValid() {
		f.st.Reopens++
		if err := f.reopen(); err != nil {
			return false, err
		}
	} else if f.silent++; f.silent > mtftpMaxSilent {
		return true, nil
	}
	f.sendPacket(now)
	return false, nil
}

// reopen replaces the unicast socket (iPXE's tftp_reopen): a new local
// port, no peer, no ACKs until a unicast packet comes again.
func (f *mtftpFetch) reopen() error {
	c, err := f.open()
	if err != nil {
		return fmt.Errorf("mtftp: reopen the socket for %s: %w", f.path, err)
	}
	if f.conn != nil {
		f.conn.Close()
	}
	f.conn, f.peer, f.master = c, netip.AddrPort{}, false
	return nil
}

func (f *mtftpFetch) finish(err error) {
	if f.done {
		return
	}
	f.done, f.err = true, err
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// plainTFTP is what iPXE asks after its fallback: blksize 1432 and tsize
// to port 69. Its retry timer backs off from 1/4 s to 10 s (about 16 s
// before it gives up); tftp.Get's fixed timeout and tries come close.
func plainTFTP(ctx context.Context, local netip.Addr, server netip.AddrPort, path string, w io.Writer) (int64, error) {
	st, err := tftp.Get(ctx, local, netip.AddrPortFrom(server.Addr(), 69), path, w,
		tftp.ClientOptions{BlockSize: 1432, Timeout: 2 * time.Second, Tries: 8})
	return st.Bytes, err
}

// ctxErr is ctx's error, for a fetch interrupted by its machine's end.
func ctxErr(ctx context.Context, path string) error {
	return fmt.Errorf("mtftp %s: %w", path, ctx.Err())
}
