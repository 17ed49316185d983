package mcast

import (
	"net"
	"net/netip"
	"sync"
)

// Hub is one socket joined to a group whose datagrams it hands to every
// Receiver of one process that was built with it (ReceiverConfig.Hub),
// each through the same datagram handling as a Receiver's own socket.
// It exists for bootfleet storm, which plays hundreds of machines in one
// process: with a socket each, the kernel copies every datagram once per
// machine and the process reads each copy with a system call of its own,
// more work than two CPUs do at the group's rate, so the emulated machines
// lost datagrams that real ones, each with a CPU of its own, would not.
// An agent has one Receiver and no Hub.
type Hub struct {
	conn *net.UDPConn
	got  int // the socket's receive buffer, as granted

	mu   sync.RWMutex
	rcvs map[*Receiver]struct{}

	slabOnce sync.Once
	slab     *SharedSlab
}

// Slab is the one SharedSlab of the group's content (of size bytes) for
// the caches of every Receiver of this Hub.
func (h *Hub) Slab(size int64) *SharedSlab {
	h.slabOnce.Do(func() { h.slab = NewSharedSlab(size) })
	return h.slab
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
	return &Hub{conn: c, got: got, rcvs: map[*Receiver]struct{}{}}, nil
}

// Run reads the group until Close.
func (h *Hub) Run() {
	buf, oob := make([]byte, 2048), make([]byte, stampSpace)
	for {
		n, got, err := readStamped(h.conn, buf, oob)
		if err != nil {
			return
		}
		h.mu.RLock()
		for r := range h.rcvs {
			r.datagram(buf[:n], got)
		}
		h.mu.RUnlock()
	}
}

// Close leaves the group; Run returns.
func (h *Hub) Close() error { return h.conn.Close() }

func (h *Hub) add(r *Receiver) {
	h.mu.Lock()
	h.rcvs[r] = struct{}{}
	h.mu.Unlock()
}

func (h *Hub) remove(r *Receiver) {
	h.mu.Lock()
	delete(h.rcvs, r)
	h.mu.Unlock()
}
