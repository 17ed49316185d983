package mcast

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"golang.org/x/net/ipv4"
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

	busy []*Receiver // deliver's, reused
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

// hubBatch is the most datagrams the Hub reads with one system call
// (recvmmsg) and hands to each Receiver under one hold of its lock.
const hubBatch = 64

// parsed is one datagram as the Hub hands it to every Receiver.
type parsed struct {
	d   chunkwire.Data
	ok  bool // d is a sound Data, its checksum right
	got arrival
}

// Run reads the group until Close.
//
// It reads what waits in the socket, up to hubBatch datagrams, at once
// and hands the batch to one Receiver after another: each Receiver's
// state is then touched once per batch rather than once per datagram,
// which at 200 Receivers is most of the Hub's cost (their locks and
// their maps, out of the CPU's cache by the time the next datagram
// comes). Each datagram is still handled as it arrived, in order.
func (h *Hub) Run() {
	pc := ipv4.NewPacketConn(h.conn)
	msgs := make([]ipv4.Message, hubBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
		msgs[i].OOB = make([]byte, stampSpace)
	}
	batch := make([]parsed, 0, hubBatch)
	for {
		n, err := pc.ReadBatch(msgs, 0)
		if err != nil {
			return
		}
		now := time.Now()
		batch = batch[:0]
		for _, m := range msgs[:n] {
			batch = append(batch, parse(m.Buffers[0][:m.N], stamps(m.OOB[:m.NN], now)))
		}
		h.deliver(batch)
	}
}

// parse parses and checks b, which arrived as got says, once for every
// Receiver.
func parse(b []byte, got arrival) parsed {
	d, err := chunkwire.ParseData(b)
	return parsed{d: d, ok: err == nil, got: got}
}

// deliver hands a batch of datagrams, parsed and checked once, to every
// Receiver: first to those whose lock is free, then to the others. A
// Receiver's lock is also taken by its machine's reads and its ticks;
// were the Hub to wait on each in turn, it would park and queue behind
// the process's other goroutines up to once per Receiver, and every
// machine's datagrams would wait in the socket meanwhile, its requests
// held back (backlog.go) until they were read. Splitting the Receivers
// among goroutines measured no faster on a 2-CPU host that the server
// and the machines share.
func (h *Hub) deliver(batch []parsed) {
	busy := h.busy[:0]
	for _, r := range *h.rcvs.Load() {
		if !r.tryHandleBatch(batch) {
			busy = append(busy, r)
		}
	}
	for _, r := range busy {
		r.handleBatch(batch)
	}
	clear(busy)
	h.busy = busy[:0]
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
