package storm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// TFTPOptions are what the firmware's TFTP client asks and how patiently
// it waits.
type TFTPOptions struct {
	// BlockSize is the blksize option (RFC 2348), 8..65464; 0 sends none
	// and gets 512-byte blocks. uefi default 1468 (OVMF), bios 1432.
	BlockSize int
	// WindowSize is the windowsize option (RFC 7440); 0 sends none
	// (lockstep). uefi default 4, bios 0.
	WindowSize int
	// SizeProbe first asks for tsize alone and aborts with ERROR 8 once
	// the OACK gives the size, then downloads: EDK II's PXE base code
	// does this for every NBP. uefi default true, bios false.
	SizeProbe bool
	// Timeout is the wait for the next packet before resending the RRQ or
	// the last ACK. Default 4 s (EDK II's PXE).
	Timeout time.Duration
	// Tries is how many times a packet is sent (the first time included)
	// before the machine gives up. Default 6.
	Tries int
}

// tftpStats is what a transfer did.
type tftpStats struct {
	bytes       int64
	tries       int // RRQs sent, retransmissions included
	retransmits int // ACKs sent again after a timeout
}

// tftpGet downloads file from server (port 69) using local as the source
// address, as firmware does: RRQ with options, OACK, ACK 0, DATA acked
// every windowsize blocks, the last ACK resent when DATA stops coming.
func tftpGet(ctx context.Context, local netip.Addr, server netip.AddrPort, file string, o TFTPOptions) (tftpStats, error) {
	var st tftpStats
	if o.SizeProbe {
		_, tries, err := tftpTransfer(ctx, local, server, file, o, true, &st)
		st.tries += tries
		if err != nil {
			return st, err
		}
	}
	_, tries, err := tftpTransfer(ctx, local, server, file, o, false, &st)
	st.tries += tries
	return st, err
}

// tftpTransfer runs one RRQ. With probe it stops at the OACK and returns
// tsize.
func tftpTransfer(ctx context.Context, local netip.Addr, server netip.AddrPort, file string, o TFTPOptions, probe bool, st *tftpStats) (int64, int, error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		return 0, 0, fmt.Errorf("socket on %v: %w", local, err)
	}
	defer conn.Close()
	stopWatch := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stopWatch()

	req := &tftp.Request{Op: tftp.OpRRQ, Filename: file, Mode: "octet"}
	if o.BlockSize > 0 {
		req.Options = append(req.Options, tftp.Option{Name: "blksize", Value: strconv.Itoa(o.BlockSize)})
	}
	req.Options = append(req.Options, tftp.Option{Name: "tsize", Value: "0"})
	if o.WindowSize > 0 && !probe {
		req.Options = append(req.Options, tftp.Option{Name: "windowsize", Value: strconv.Itoa(o.WindowSize)})
	}
	rrq := req.Append(nil)
	buf := make([]byte, 65536+4)

	// The first answer names the server's transfer port (its TID).
	// A send that fails (a local firewall, ENOBUFS in a storm) is a lost
	// packet to firmware: it waits and sends again.
	var peer netip.AddrPort
	var first tftp.Packet
	var sendErr error
	tries := 0
	for first == nil {
		if tries == o.Tries {
			err := fmt.Errorf("no answer to RRQ for %s from %v after %d tries (%v each)", file, server, tries, o.Timeout)
			if sendErr != nil {
				err = fmt.Errorf("%w; the last RRQ was not sent: %v", err, sendErr)
			}
			return 0, tries, err
		}
		tries++
		_, sendErr = conn.WriteToUDPAddrPort(rrq, server)
		p, from, err := readPacket(ctx, conn, buf, o.Timeout, netip.AddrPort{})
		if err != nil {
			return 0, tries, err
		}
		if p == nil || from.Addr() != server.Addr() {
			continue
		}
		first, peer = p, from
	}

	blksize, window := 512, 1
	var size int64 = -1
	switch p := first.(type) {
	case *tftp.Error:
		return 0, tries, fmt.Errorf("server sent ERROR %d %s for %s after %d %s", p.Code, p.Message, file, tries, plural(tries, "try", "tries"))
	case *tftp.OAck:
		for _, opt := range p.Options {
			n, err := strconv.ParseInt(opt.Value, 10, 64)
			if err != nil {
				return 0, tries, fmt.Errorf("OACK for %s: option %s=%q is not a number", file, opt.Name, opt.Value)
			}
			switch strings.ToLower(opt.Name) {
			case "blksize":
				if n < 8 || (o.BlockSize > 0 && n > int64(o.BlockSize)) {
					return 0, tries, fmt.Errorf("OACK for %s: blksize %d, want 8..%d (RFC 2348)", file, n, o.BlockSize)
				}
				blksize = int(n)
			case "windowsize":
				if n < 1 || n > int64(max(o.WindowSize, 1)) {
					return 0, tries, fmt.Errorf("OACK for %s: windowsize %d, want 1..%d (RFC 7440)", file, n, o.WindowSize)
				}
				window = int(n)
			case "tsize":
				size = n
			}
		}
		if probe {
			abort := (&tftp.Error{Code: tftp.ErrCodeOptionRefused, Message: "size probe done"}).Append(nil)
			conn.WriteToUDPAddrPort(abort, peer)
			return size, tries, nil
		}
		first = nil // the transfer starts with our ACK 0
	case *tftp.Data:
		if probe {
			return -1, tries, nil // no OACK: no size, as with an old server
		}
	default:
		return 0, tries, fmt.Errorf("server answered RRQ for %s with %v, want OACK, DATA or ERROR", file, first.Opcode())
	}
	n, err := receiveData(ctx, conn, buf, peer, first, file, blksize, window, o, st)
	st.bytes += n
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("%s: got %d bytes, OACK said tsize %d", file, n, size)
	}
	return size, tries, err
}

// receiveData receives DATA until a short block, acking every window
// blocks and resending the last ACK after each timeout.
func receiveData(ctx context.Context, conn *net.UDPConn, buf []byte, peer netip.AddrPort, first tftp.Packet, file string, blksize, window int, o TFTPOptions, st *tftpStats) (int64, error) {
	var got int64
	next := uint16(1) // the block expected
	inWindow := 0
	gapAcked := false
	// An ACK that cannot be sent is lost like one dropped on the wire:
	// the timeout below sends it again.
	ack := func(block uint16) { conn.WriteToUDPAddrPort((&tftp.Ack{Block: block}).Append(nil), peer) }
	if first == nil {
		ack(0)
	}
	timeouts := 0
	for {
		p := first
		first = nil
		if p == nil {
			var err error
			p, _, err = readPacket(ctx, conn, buf, o.Timeout, peer)
			if err != nil {
				return got, err
			}
		}
		if p == nil { // timeout: the window or our ACK was lost
			timeouts++
			if timeouts >= o.Tries {
				return got, fmt.Errorf("no DATA block %d of %s from %v after %d tries (%v each)", next, file, peer, timeouts, o.Timeout)
			}
			st.retransmits++
			inWindow = 0
			ack(next - 1)
			continue
		}
		switch d := p.(type) {
		case *tftp.Error:
			return got, fmt.Errorf("server sent ERROR %d %s for %s at block %d", d.Code, d.Message, file, next)
		case *tftp.Data:
			if d.Block != next {
				// A duplicate or a gap: ack the last block in order once,
				// so the sender resumes from there (RFC 7440 section 4).
				if !gapAcked {
					gapAcked = true
					inWindow = 0
					ack(next - 1)
				}
				continue
			}
			if len(d.Payload) > blksize {
				return got, fmt.Errorf("DATA block %d of %s has %d bytes, negotiated blksize %d", d.Block, file, len(d.Payload), blksize)
			}
			timeouts, gapAcked = 0, false
			got += int64(len(d.Payload))
			inWindow++
			last := len(d.Payload) < blksize
			if last || inWindow == window {
				inWindow = 0
				ack(d.Block)
			}
			if last {
				return got, nil
			}
			next++
		}
	}
}

// readPacket waits up to timeout for one packet; from peer only when
// peer is set (others get ERROR 5, RFC 1350). It returns nil, nil on a
// timeout and the context's error when it is done.
func readPacket(ctx context.Context, conn *net.UDPConn, buf []byte, timeout time.Duration, peer netip.AddrPort) (tftp.Packet, netip.AddrPort, error) {
	deadline := time.Now().Add(timeout)
	for range 1024 { // bounded: a flood of stray packets counts as a timeout
		if err := ctx.Err(); err != nil {
			return nil, netip.AddrPort{}, err
		}
		conn.SetReadDeadline(deadline)
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, netip.AddrPort{}, ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, netip.AddrPort{}, nil
			}
			return nil, netip.AddrPort{}, err
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if peer.IsValid() && from != peer {
			conn.WriteToUDPAddrPort((&tftp.Error{Code: tftp.ErrCodeUnknownTransferID, Message: "unknown transfer ID"}).Append(nil), from)
			continue
		}
		p, err := tftp.ParsePacket(buf[:n])
		if err != nil {
			continue // garbage: wait on, as firmware does
		}
		return p, from, nil
	}
	return nil, netip.AddrPort{}, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
