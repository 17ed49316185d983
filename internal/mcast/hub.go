package mcast

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// Hub is one socket joined to a group whose datagrams it hands to every
// Receiver of one process that was built with it (ReceiverConfig.Hub).
// It exists for bootfleet storm, which plays hundreds of machines in one
// process: with a socket each, the kernel copies every datagram once per
// machine and the process reads each copy with a system call of its own,
// more work than two CPUs do at the group's rate, so the emulated machines
// lost datagrams that real ones, each with a CPU of its own, would not.
//
// The Hub parses and checks each datagram once (chunkwire.ParseData, its
// CRC) and hands the parsed datagram to every Receiver, which from there
// handles it as it handles one from a socket of its own (Receiver.handle).
// A datagram's check gives the same answer for every Receiver, so doing it
// N times would only have cost the one core that reads the group N times
// the work: at 200 machines the Hub fell behind the group, its socket
// overflowed and the machines repaired what it had dropped. An agent has
// one Receiver and no Hub.
type Hub struct {
	conn *net.UDPConn
	got  int // the socket's receive buffer, as granted

	mu sync.Mutex // add and remove
	// rcvs is the Receivers, replaced whole on add and remove, so that
	// Run reads it without a lock per datagram.
	rcvs atomic.Pointer[[]*Receiver]

	slabMu sync.Mutex
	slab   atomic.Pointer[SharedSlab]
}

// Slab is the one SharedSlab of the group's content (of size bytes) for
// the caches of every Receiver of this Hub.
func (h *Hub) Slab(size int64) *SharedSlab {
	h.slabMu.Lock()
	defer h.slabMu.Unlock()
	if s := h.slab.Load(); s != nil {
		return s
	}
	s := NewSharedSlab(size)
	h.slab.Store(s)
	return s
}

// ListenHub joins group on ifi (nil: as routing says) with a receive
// buffer of readBuffer bytes (0: a Receiver's own, 4 MiB), which must
// hold the group's datagrams while the Hub hands earlier ones to every
// Receiver.
func ListenHub(group netip.AddrPort, ifi *net.Interface, readBuffer int) (*Hub, error) {
	if readBuffer <= 0 {
		readBuffer = groupReadBuffer
	}
	c, got, err := listenGroupBuffer(group, ifi, readBuffer)
	if err != nil {
		return nil, err
	}
	return newHub(c, got), nil
}

func newHub(c *net.UDPConn, got int) *Hub {
	h := &Hub{conn: c, got: got}
	h.rcvs.Store(&[]*Receiver{})
	return h
}

// Run reads the group until Close.
func (h *Hub) Run() {
	buf, oob := make([]byte, 2048), make([]byte, stampSpace)
	for {
		n, got, err := readStamped(h.conn, buf, oob)
		if err != nil {
			return
		}
		h.deliver(buf[:n], got)
	}
}

// deliver parses and checks b once and hands it to every Receiver.
func (h *Hub) deliver(b []byte, got arrival) {
	d, err := chunkwire.ParseData(b)
	for _, r := range *h.rcvs.Load() {
		r.handle(d, err == nil, got)
	}
}

// Close leaves the group; Run returns.
func (h *Hub) Close() error { return h.conn.Close() }

func (h *Hub) add(r *Receiver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := append(slices.Clone(*h.rcvs.Load()), r)
	h.rcvs.Store(&rs)
}

func (h *Hub) remove(r *Receiver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := slices.DeleteFunc(slices.Clone(*h.rcvs.Load()), func(x *Receiver) bool { return x == r })
	h.rcvs.Store(&rs)
}

// onSlab returns the Hub's SharedSlab when buf, a cache's buffer of
// chunk, is the chunk's place in it, where its bytes may already be; nil
// otherwise.
func (h *Hub) onSlab(chunk uint32, buf []byte) *SharedSlab {
	if h == nil {
		return nil
	}
	if s := h.slab.Load(); s != nil && s.owns(chunk, buf) {
		return s
	}
	return nil
}
