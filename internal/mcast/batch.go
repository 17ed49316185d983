package mcast

import (
	"io"
	"net"

	"golang.org/x/net/ipv4"
)

// Batch holds a burst of datagrams to one destination and sends them
// with one sendmmsg when the socket is a *net.UDPConn; any other
// net.PacketConn (a test's wrapper) gets one WriteTo each. At a storm's
// rate a syscall per datagram was most of a sender's CPU.
type Batch struct {
	conn      net.PacketConn
	pc        *ipv4.PacketConn // nil: one WriteTo per datagram
	bufs      [][]byte
	msgs      []ipv4.Message
	n         int // datagrams held
	wireBytes int // their size on the wire, WireOverhead counted
}

// NewBatch returns a batch of up to size datagrams (at least 1) of at
// most maxLen bytes each, for conn.
func NewBatch(conn net.PacketConn, size, maxLen int) *Batch {
	size = max(1, size)
	b := &Batch{conn: conn, bufs: make([][]byte, size), msgs: make([]ipv4.Message, size)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, 0, maxLen)
		b.msgs[i].Buffers = [][]byte{nil}
	}
	if u, ok := conn.(*net.UDPConn); ok {
		b.pc = ipv4.NewPacketConn(u)
	}
	return b
}

// Next is the buffer for the next datagram: empty, with room for maxLen
// bytes. The caller fills it and hands it to Push; a full batch is sent
// before Next is called again.
func (b *Batch) Next() []byte { return b.bufs[b.n][:0] }

// Push adds d, the buffer Next returned filled, as the batch's next
// datagram.
func (b *Batch) Push(d []byte) {
	b.bufs[b.n] = d
	b.wireBytes += len(d) + WireOverhead
	b.n++
}

// Len is how many datagrams the batch holds.
func (b *Batch) Len() int { return b.n }

// Full reports whether the batch holds as many datagrams as it can.
func (b *Batch) Full() bool { return b.n == len(b.bufs) }

// WireBytes is the size on the wire of the datagrams held.
func (b *Batch) WireBytes() int { return b.wireBytes }

// Send sends the datagrams held to to and empties the batch. report gets
// each run of datagrams sent with their UDP payload bytes, and each
// datagram the socket refused with its error; a refused one is skipped,
// as the network would lose it.
func (b *Batch) Send(to *net.UDPAddr, report func(sent int, bytes uint64, err error)) {
	defer func() { b.n, b.wireBytes = 0, 0 }()
	if b.pc == nil {
		for _, d := range b.bufs[:b.n] {
			if _, err := b.conn.WriteTo(d, to); err != nil {
				report(0, 0, err)
				continue
			}
			report(1, uint64(len(d)), nil)
		}
		return
	}
	ms := b.msgs[:b.n]
	for i := range ms {
		ms[i].Buffers[0], ms[i].Addr = b.bufs[i], to
	}
	for len(ms) > 0 {
		k, err := b.pc.WriteBatch(ms, 0)
		if err == nil && k == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			report(0, 0, err)
			ms = ms[1:]
			continue
		}
		var bytes uint64
		for _, m := range ms[:k] {
			bytes += uint64(len(m.Buffers[0]))
		}
		report(k, bytes, nil)
		ms = ms[k:]
	}
}

// Cap is the most datagrams the batch holds.
func (b *Batch) Cap() int { return len(b.bufs) }
