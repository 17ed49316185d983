package mtftp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

type heard struct {
	blk     uint16
	data    []byte
	from    netip.AddrPort
	unicast bool
}

// master runs c as iPXE's mtftp client does once a unicast packet made it
// the master: every DATA heard, on either socket, is answered with an ACK
// of its first missing block (0-based) to the DATA's source. lose drops a
// datagram from the group before the client sees it. It returns when the
// file is whole or nothing came for quiet.
func (c *client) master(lose func(blk uint16, seen int) bool, quiet time.Duration) (acks int) {
	c.t.Helper()
	ch := make(chan heard, 4096)
	read := func(conn *net.UDPConn, unicast bool) {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if n >= 4 && binary.BigEndian.Uint16(buf) == uint16(tftp.OpDATA) {
				ch <- heard{binary.BigEndian.Uint16(buf[2:]), append([]byte(nil), buf[4:n]...), from, unicast}
			}
		}
	}
	go read(c.uni, true)
	go read(c.mc, false)
	defer func() { c.uni.SetReadDeadline(time.Now()); c.mc.SetReadDeadline(time.Now()) }()
	seen := map[uint16]int{}
	isMaster := false
	for !c.whole() {
		var h heard
		select {
		case h = <-ch:
		case <-time.After(quiet):
			return acks
		}
		seen[h.blk]++
		if !h.unicast && lose(h.blk, seen[h.blk]) {
			continue
		}
		isMaster = isMaster || h.unicast
		c.blocks[h.blk] = h.data
		if len(h.data) < BlockSize {
			c.last = int(h.blk)
		}
		if !isMaster {
			continue
		}
		gap := 0
		for c.blocks[uint16(gap+1)] != nil {
			gap++
		}
		ack := []byte{0, byte(tftp.OpACK), byte(gap >> 8), byte(gap)}
		if _, err := c.uni.WriteToUDPAddrPort(ack, h.from); err != nil {
			c.t.Fatal(err)
		}
		acks++
	}
	return acks
}

// TestMasterGetsRepairs: iPXE never sends the RRQ of its repair (see
// master.go), so a client that lost blocks relies on being the master:
// the server names it with a unicast copy, and after the cycle runs the
// carousel on from its first gap until it ACKs the whole file. The client
// sends one RRQ, loses every other block of the first pass, and ends up
// with every byte; the carousel then stops.
func TestMasterGetsRepairs(t *testing.T) {
	kernel := content(200*BlockSize + 9) // 201 blocks
	r := newRig(t, memFS{"k": fileOf(kernel)}, 4<<20)
	a := r.client(t)
	a.rrq(r, "k")
	acks := a.master(func(blk uint16, seen int) bool { return seen == 1 && blk%2 == 0 }, 3*time.Second)
	if !a.whole() || !bytes.Equal(a.file(), kernel) {
		t.Fatalf("master: %d of 201 blocks after %d ACKs, want the whole file without a second RRQ", len(a.blocks), acks)
	}
	time.Sleep(200 * time.Millisecond)
	st := r.srv.Stats()
	// The first pass, then from the first gap (block 2) to the last block
	// the client lacks (200): the pass stops when the client ACKs the whole
	// file, which lags the DATA by what it has yet to read (up to 44
	// datagrams seen on a loaded machine).
	if st.Requests != 1 || st.Unicasts == 0 || st.Datagrams < 201+199 || st.Datagrams > 201+200+80 {
		t.Errorf("stats %+v after %d ACKs: want 1 RRQ, a unicast copy, about 400 datagrams (one pass, then from block 2) and a stop", st, acks)
	}
	if got := r.srv.Stats().Datagrams; got != st.Datagrams {
		t.Errorf("the carousel went on after the master held the file: %d datagrams, then %d", st.Datagrams, got)
	}
}

// TestMastersQueue: the head of the queue is the master; an ACK of the
// whole file or Silence passes it on; a client that asks again with a new
// port (its socket reopened) keeps its place and is named again.
func TestMastersQueue(t *testing.T) {
	a, b := netip.MustParseAddrPort("10.0.0.2:1000"), netip.MustParseAddrPort("10.0.0.3:2000")
	t0 := time.Unix(1000, 0)
	var m masters
	m.add(a, t0)
	m.add(b, t0)
	if to, ok := m.unicast(t0); !ok || to != a {
		t.Fatalf("first copy to %v, %v; want the first asker %v", to, ok, a)
	}
	if _, ok := m.unicast(t0.Add(NameEvery / 2)); ok {
		t.Errorf("named again within NameEvery")
	}
	m.ack(a, 5, 100, t0.Add(time.Millisecond))
	c := carousel{blocks: 100}
	m.owe(&c, t0.Add(time.Second))
	if c.next != 6 || c.left != 95 {
		t.Errorf("after ACK 5 of 100 the carousel owes %d from %d, want 95 from 6", c.left, c.next)
	}
	a2 := netip.AddrPortFrom(a.Addr(), 1001)
	m.add(a2, t0.Add(time.Second))
	if to, ok := m.unicast(t0.Add(time.Second)); !ok || to != a2 {
		t.Errorf("after a new RRQ from port 1001 the copy goes to %v, %v; want %v", to, ok, a2)
	}
	m.ack(a2, 100, 100, t0.Add(2*time.Second))
	if to, ok := m.unicast(t0.Add(2 * time.Second)); !ok || to != b || m.wholes != 1 {
		t.Errorf("after the master ACKed the whole file: copy to %v, %v, %d whole; want %v and 1", to, ok, m.wholes, b)
	}
	m.unicast(t0.Add(2*time.Second + Silence))
	if len(m.queue) != 0 {
		t.Errorf("a master silent for %v is still queued: %v", Silence, m.queue)
	}
	c = carousel{blocks: 100}
	m.owe(&c, t0.Add(10*time.Second))
	if c.left != 0 {
		t.Errorf("nobody waits, yet the carousel owes %d", c.left)
	}
}

// TestMasterStallsWithoutTheGroup: a client the group never reaches (a
// snooping switch forwards it only to ports that sent IGMP reports, and
// iPXE sends none) ACKs only the unicast copies. After MaxRenames copies
// without progress from the group the server drops it and stops, so its
// iPXE falls back to plain TFTP, and Grant names the group in no script
// for StallHold.
func TestMasterStallsWithoutTheGroup(t *testing.T) {
	kernel := content(400*BlockSize + 1)
	r := newRig(t, memFS{"k": fileOf(kernel)}, 4<<20)
	a := r.client(t)
	a.rrq(r, "k")
	start := time.Now()
	a.master(func(uint16, int) bool { return true }, 4*time.Second)
	st := r.srv.Stats()
	if st.Stalls != 1 || a.whole() {
		t.Fatalf("stats %+v, client has %d blocks: want one stall and a client without the file", st, len(a.blocks))
	}
	if most := time.Duration(MaxRenames+3) * NameEvery; time.Since(start) > most+4*time.Second {
		t.Errorf("the stall took %v, want about %v of copies", time.Since(start)-4*time.Second, most)
	}
	if got := r.srv.Stats().Datagrams; got != st.Datagrams {
		t.Errorf("the carousel went on after its only master stalled: %d datagrams, then %d", st.Datagrams, got)
	}
	if r.srv.Grant("k", int64(len(kernel))) {
		t.Errorf("Grant gave the group away right after a master stalled, want no for %v", StallHold)
	}
	// Its iPXE times out with a peer and asks again from a new port: named
	// master again it would stall again, round and round, so it is
	// refused and its script takes the next URL.
	again := r.client(t)
	again.rrq(r, "k")
	p, _, err := again.unicast(2 * time.Second)
	if e, ok := p.(*tftp.Error); err != nil || !ok || e.Code != tftp.ErrCodeAccessViolation {
		t.Fatalf("the stalled client asked again and got %v (%v), want an access violation ERROR", p, err)
	}
	if got := r.srv.Stats().Datagrams; got != st.Datagrams {
		t.Errorf("the carousel ran again for the stalled client: %d datagrams, then %d", st.Datagrams, got)
	}
}

// TestStormOfWholeClients: a storm's clients ask within one cycle and the
// group serves each in full, so none ACKs (iPXE closes its socket once it
// holds the file). The carousel sends that cycle and no more: each client
// is taken for whole after UnheardCopies copies while it idles, where a
// full cycle per queued client kept a 200-machine storm's group busy long
// after the machines had booted.
func TestStormOfWholeClients(t *testing.T) {
	kernel := content(200*BlockSize + 9) // 201 blocks
	r := newRig(t, memFS{"k": fileOf(kernel)}, 4<<20)
	const others = maxOpening - 2 // all RRQs at once, none dropped
	rrq := (&tftp.Request{Op: tftp.OpRRQ, Filename: "k", Mode: "octet"}).Append(nil)
	for i := range others {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteToUDPAddrPort(rrq, r.req); err != nil {
			t.Fatal(err)
		}
		c.Close() // whole, as far as the server will learn
	}
	a := r.client(t)
	a.rrq(r, "k")
	a.read(0, time.Second)
	if !a.whole() || !bytes.Equal(a.file(), kernel) {
		t.Fatalf("listener: %d of 201 blocks, want the file", len(a.blocks))
	}
	// Heads named UnheardCopies copies NameEvery apart for Silence, then
	// the rest dropped at once: not half a second for each.
	deadline := time.Now().Add(Silence + 2*time.Duration(UnheardCopies+1)*NameEvery + time.Second)
	for {
		r.srv.mu.Lock()
		stopped, gone := r.srv.file == nil, r.srv.masters.gone
		r.srv.mu.Unlock()
		if stopped {
			if gone != others+1 {
				t.Errorf("%d clients taken for whole, want all %d", gone, others+1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the carousel still runs %v after a cycle served every client", time.Until(deadline))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The RRQs came within the first blocks: one cycle from the last of
	// them.
	if st := r.srv.Stats(); st.Datagrams > 2*201 || st.Cycles != 1 {
		t.Errorf("stats %+v: want one cycle of 201 datagrams (and a burst), not one per client", st)
	}
}
