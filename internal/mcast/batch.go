package mcast

import (
	"io"
	"net"

	"golang.org/x/net/ipv4"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// batch holds the data datagrams of one burst, all to one group, and
// sends them with one sendmmsg when the socket is a *net.UDPConn; any
// other net.PacketConn (a test's wrapper) gets one WriteTo each.
type batch struct {
	conn      net.PacketConn
	pc        *ipv4.PacketConn // nil: one WriteTo per datagram
	to        *net.UDPAddr
	bufs      [][]byte
	msgs      []ipv4.Message
	n         int // datagrams held
	wireBytes int // their size on the wire, WireOverhead counted
}

// newBatch returns a batch of up to size datagrams (1 to a chunk's
// fragments) for conn.
func newBatch(conn net.PacketConn, size int) *batch {
	size = max(1, min(size, chunkwire.FragmentsPerChunk))
	b := &batch{conn: conn, bufs: make([][]byte, size), msgs: make([]ipv4.Message, size)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, 0, chunkwire.MaxDataLen)
		b.msgs[i].Buffers = [][]byte{nil}
	}
	if u, ok := conn.(*net.UDPConn); ok {
		b.pc = ipv4.NewPacketConn(u)
	}
	return b
}

// add encodes d as the batch's next datagram; the caller sends a full
// batch before adding more.
func (b *batch) add(d chunkwire.Data) {
	b.bufs[b.n] = d.Append(b.bufs[b.n][:0])
	b.wireBytes += len(b.bufs[b.n]) + WireOverhead
	b.n++
}

func (b *batch) full() bool { return b.n == len(b.bufs) }

// send sends the datagrams held to b.to and empties the batch. report
// gets each run of datagrams sent with their UDP payload bytes, and each
// datagram the socket refused with its error; a refused one is skipped,
// as the network would lose it.
func (b *batch) send(report func(sent int, bytes uint64, err error)) {
	defer func() { b.n, b.wireBytes = 0, 0 }()
	if b.pc == nil {
		for _, d := range b.bufs[:b.n] {
			if _, err := b.conn.WriteTo(d, b.to); err != nil {
				report(0, 0, err)
				continue
			}
			report(1, uint64(len(d)), nil)
		}
		return
	}
	ms := b.msgs[:b.n]
	for i := range ms {
		ms[i].Buffers[0], ms[i].Addr = b.bufs[i], b.to
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
