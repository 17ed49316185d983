package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ClientOptions are what a client asks of the server and how patiently it
// waits, as boot firmware's TFTP client has them.
type ClientOptions struct {
	// BlockSize is the blksize option (RFC 2348), 8..65464; 0 sends none
	// and gets 512-byte blocks.
	BlockSize int
	// WindowSize is the windowsize option (RFC 7440), 1..65535; 0 sends
	// none (lockstep).
	WindowSize int
	// SizeProbe first asks for tsize alone and aborts with ERROR 8 once
	// the OACK gives the size, then downloads: EDK II's PXE base code does
	// this for every NBP.
	SizeProbe bool
	// Timeout is the wait for the next packet before resending the RRQ or
	// the last ACK. Default 4 s (EDK II's PXE).
	Timeout time.Duration
	// Tries is how many times a packet is sent (the first time included)
	// before the client gives up. Default 6.
	Tries int
	// ReadBuffer is the socket's receive buffer in bytes (SO_RCVBUF,
	// capped by net.core.rmem_max). Default 0: the system's default, as
	// small as a firmware's receive ring is.
	ReadBuffer int
}

// GetStats is what one Get did.
type GetStats struct {
	Bytes       int64 // file bytes received; the size probe moves none
	Tries       int   // RRQs sent, the probe's and retransmissions included
	Retransmits int   // ACKs sent again after a timeout
}

// Get downloads file from server into w, from a socket bound to local (the
// unspecified IPv4 address when local is not valid), as firmware does: RRQ
// with options and tsize, OACK, ACK 0, DATA acked every windowsize blocks,
// the last ACK resent when DATA stops coming. Block numbers wrap past
// 65535. A send that fails (a local firewall, ENOBUFS in a storm) counts
// as a packet lost on the wire: the client waits and sends again.
func Get(ctx context.Context, local netip.Addr, server netip.AddrPort, file string, w io.Writer, o ClientOptions) (GetStats, error) {
	if o.Timeout <= 0 {
		o.Timeout = 4 * time.Second
	}
	if o.Tries <= 0 {
		o.Tries = 6
	}
	if !local.IsValid() {
		local = netip.IPv4Unspecified()
	}
	var st GetStats
	if o.SizeProbe {
		if _, err := getOnce(ctx, local, server, file, io.Discard, true, o, &st); err != nil {
			return st, err
		}
	}
	_, err := getOnce(ctx, local, server, file, w, false, o, &st)
	return st, err
}

// clientConn is one transfer's socket: the server's transfer ID once known
// and a buffer for the largest DATA.
type clientConn struct {
	*net.UDPConn
	peer    netip.AddrPort
	buf     []byte
	ack     []byte
	timeout time.Duration
}

// getOnce runs one RRQ and counts it into st. With probe it stops at the
// OACK and returns tsize (-1 when the server sent none).
func getOnce(ctx context.Context, local netip.Addr, server netip.AddrPort, file string, w io.Writer, probe bool, o ClientOptions, st *GetStats) (int64, error) {
	udp, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		return 0, fmt.Errorf("socket on %v: %w", local, err)
	}
	defer udp.Close()
	if o.ReadBuffer > 0 {
		if err := udp.SetReadBuffer(o.ReadBuffer); err != nil {
			return 0, fmt.Errorf("receive buffer of %d bytes on %v: %w", o.ReadBuffer, local, err)
		}
	}
	stopWatch := context.AfterFunc(ctx, func() { udp.SetReadDeadline(time.Unix(1, 0)) })
	defer stopWatch()
	c := &clientConn{UDPConn: udp, buf: make([]byte, 65536+4), timeout: o.Timeout}

	triesBefore := st.Tries
	first, err := c.request(ctx, server, file, o, probe, st)
	tries := st.Tries - triesBefore
	if err != nil {
		return 0, err
	}
	blksize, window := 512, 1
	var size int64 = -1
	switch p := first.(type) {
	case *Error:
		return 0, fmt.Errorf("server sent ERROR %d %s for %s after %d %s", p.Code, p.Message, file, tries, plural(tries, "try", "tries"))
	case *OAck:
		if blksize, window, size, err = acceptOAck(p, file, o); err != nil {
			return 0, err
		}
		if probe {
			c.WriteToUDPAddrPort((&Error{Code: ErrCodeOptionRefused, Message: "size probe done"}).Append(nil), c.peer)
			return size, nil
		}
		first = nil // the transfer starts with our ACK 0
	case *Data:
		if probe {
			return -1, nil // no OACK: no size, as with an old server
		}
	default:
		return 0, fmt.Errorf("server answered RRQ for %s with %v, want OACK, DATA or ERROR", file, first.Opcode())
	}
	n, err := c.receive(ctx, w, first, file, blksize, window, o.Tries, st)
	st.Bytes += n
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("%s: got %d bytes, OACK said tsize %d", file, n, size)
	}
	return size, err
}

// request sends the RRQ until an answer comes from the server's address,
// whose port becomes the transfer's peer, and returns that answer.
func (c *clientConn) request(ctx context.Context, server netip.AddrPort, file string, o ClientOptions, probe bool, st *GetStats) (Packet, error) {
	req := &Request{Op: OpRRQ, Filename: file, Mode: "octet"}
	if o.BlockSize > 0 {
		req.Options = append(req.Options, Option{Name: "blksize", Value: strconv.Itoa(o.BlockSize)})
	}
	req.Options = append(req.Options, Option{Name: "tsize", Value: "0"})
	if o.WindowSize > 0 && !probe {
		req.Options = append(req.Options, Option{Name: "windowsize", Value: strconv.Itoa(o.WindowSize)})
	}
	rrq := req.Append(nil)
	var sendErr error
	for tries := 0; ; {
		if tries == o.Tries {
			err := fmt.Errorf("no answer to RRQ for %s from %v after %d tries (%v each)", file, server, tries, o.Timeout)
			if sendErr != nil {
				err = fmt.Errorf("%w; the last RRQ was not sent: %v", err, sendErr)
			}
			return nil, err
		}
		tries++
		st.Tries++
		_, sendErr = c.WriteToUDPAddrPort(rrq, server)
		p, from, err := c.read(ctx)
		if err != nil {
			return nil, err
		}
		if p != nil && from.Addr() == server.Addr() {
			c.peer = from
			return p, nil
		}
	}
}

// acceptOAck checks the server's OACK against what was asked and returns
// the block size, the window and tsize (-1 when absent).
func acceptOAck(p *OAck, file string, o ClientOptions) (blksize, window int, size int64, err error) {
	blksize, window, size = 512, 1, -1
	for _, opt := range p.Options {
		n, err := strconv.ParseInt(opt.Value, 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("OACK for %s: option %s=%q is not a number", file, opt.Name, opt.Value)
		}
		switch strings.ToLower(opt.Name) {
		case "blksize":
			if n < minBlockSize || (o.BlockSize > 0 && n > int64(o.BlockSize)) {
				return 0, 0, 0, fmt.Errorf("OACK for %s: blksize %d, want %d..%d (RFC 2348)", file, n, minBlockSize, o.BlockSize)
			}
			blksize = int(n)
		case "windowsize":
			if n < 1 || n > int64(max(o.WindowSize, 1)) {
				return 0, 0, 0, fmt.Errorf("OACK for %s: windowsize %d, want 1..%d (RFC 7440)", file, n, o.WindowSize)
			}
			window = int(n)
		case "tsize":
			size = n
		}
	}
	return blksize, window, size, nil
}

// receive writes DATA to w until a short block, acking every window
// blocks and resending the last ACK after each timeout. first, if not
// nil, is block 1 that answered the RRQ.
func (c *clientConn) receive(ctx context.Context, w io.Writer, first Packet, file string, blksize, window, tries int, st *GetStats) (int64, error) {
	var got int64
	next := uint16(1) // the block expected
	inWindow := 0
	gapAcked := false
	if first == nil {
		c.sendAck(0)
	}
	timeouts := 0
	for {
		p := first
		first = nil
		if p == nil {
			var err error
			if p, _, err = c.read(ctx); err != nil {
				return got, err
			}
		}
		if p == nil { // timeout: the window or our ACK was lost
			timeouts++
			if timeouts >= tries {
				return got, fmt.Errorf("no DATA block %d of %s from %v after %d tries (%v each)", next, file, c.peer, timeouts, c.timeout)
			}
			st.Retransmits++
			inWindow = 0
			c.sendAck(next - 1)
			continue
		}
		switch d := p.(type) {
		case *Error:
			return got, fmt.Errorf("server sent ERROR %d %s for %s at block %d", d.Code, d.Message, file, next)
		case *Data:
			if d.Block != next {
				// A duplicate or a gap: ack the last block in order once,
				// so the sender resumes from there (RFC 7440 section 4).
				if !gapAcked {
					gapAcked = true
					inWindow = 0
					c.sendAck(next - 1)
				}
				continue
			}
			if len(d.Payload) > blksize {
				return got, fmt.Errorf("DATA block %d of %s has %d bytes, negotiated blksize %d", d.Block, file, len(d.Payload), blksize)
			}
			if _, err := w.Write(d.Payload); err != nil {
				return got, fmt.Errorf("writing block %d of %s: %w", d.Block, file, err)
			}
			timeouts, gapAcked = 0, false
			got += int64(len(d.Payload))
			inWindow++
			last := len(d.Payload) < blksize
			if last || inWindow == window {
				inWindow = 0
				c.sendAck(d.Block)
			}
			if last {
				return got, nil
			}
			next++
		}
	}
}

// sendAck acks block. An ACK that cannot be sent is lost like one dropped
// on the wire: the timeout sends it again.
func (c *clientConn) sendAck(block uint16) {
	c.ack = (&Ack{Block: block}).Append(c.ack[:0])
	c.WriteToUDPAddrPort(c.ack, c.peer)
}

// read waits up to the timeout for one packet; from the peer only once it
// is known (others get ERROR 5, RFC 1350). It returns nil, nil on a
// timeout and the context's error when it is done.
func (c *clientConn) read(ctx context.Context) (Packet, netip.AddrPort, error) {
	deadline := time.Now().Add(c.timeout)
	for range 1024 { // bounded: a flood of stray packets counts as a timeout
		if err := ctx.Err(); err != nil {
			return nil, netip.AddrPort{}, err
		}
		c.SetReadDeadline(deadline)
		n, from, err := c.ReadFromUDPAddrPort(c.buf)
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
		if c.peer.IsValid() && from != c.peer {
			c.WriteToUDPAddrPort((&Error{Code: ErrCodeUnknownTransferID, Message: "unknown transfer ID"}).Append(nil), from)
			continue
		}
		p, err := ParsePacket(c.buf[:n])
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
