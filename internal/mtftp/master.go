package mtftp

import (
	"net/netip"
	"time"
)

// Why a master client: iPXE's mtftp client that times out with a peer
// reopens its unicast socket and sends its RRQ again, but Debian's iPXE
// (1.0.0+git-20190125) never put that RRQ on the wire in
// TestMTFTPiPXEKernel: the RRQ goes out while the new socket still
// resolves the server's name (window 0) and is dropped, and the silent
// expiries that follow count toward its fallback to plain TFTP. So a
// client that lost blocks cannot ask for a repair cycle. A unicast packet
// from the data socket, though, makes iPXE the "master client": it ACKs
// every DATA it gets with its first missing block. The server keeps one
// master at a time and runs the carousel from the master's first gap
// while it lacks blocks, so its timer never expires; when it holds the
// file (or falls silent) the next client that asked becomes master.

// NameEvery is how often a master that has not ACKed since is sent a
// unicast copy of the carousel's next DATA: the copy that makes it
// master may be lost, and a client that reopened its socket is master no
// more.
const NameEvery = 250 * time.Millisecond

// Silence is how long a master may go without ACKing before the server
// takes it for gone (whole and closed, or fallen back) and names the
// next; a guest under TCG answers within about a second.
const Silence = 2 * time.Second

// MaxRenames is how many unicast copies in a row a master may need
// (NameEvery apart, no ACK between) while its first gap stays put. A
// master that only ACKs the copies gets nothing from the group: a switch
// that does not forward it to iPXE, which sends no IGMP report. It is
// dropped, so its iPXE falls back to plain TFTP, and the server names the
// group in no script for StallHold.
const MaxRenames = 8

// StallHold is how long scripts name no mtftp:// after a master stalled.
const StallHold = 10 * time.Minute

// UnheardCopies is how many unicast copies (NameEvery apart) a head that
// has never ACKed gets before it is taken for whole: iPXE closes its
// socket once it holds the file, so of a storm's clients, those the group
// served in full never answer. Two, so one lost copy does not drop a
// client that lacks blocks.
const UnheardCopies = 2

// masters is the clients of the carousel's file not yet known to hold
// it, in the order they asked; the first is the master client.
type masters struct {
	queue    []netip.AddrPort
	since    time.Time    // when the head became the head
	named    time.Time    // when the head was last sent a unicast copy
	ackAt    time.Time    // the head's latest ACK
	gap      int          // the head's first missing block, from that ACK; 0 before one
	renames  int          // copies the head needed since the group moved its gap
	gapNamed int          // the head's gap when it was last sent a copy
	wholes   uint64       // masters that ACKed the whole file
	unheard  int          // copies the head got without ever ACKing
	gone     uint64       // heads that never ACKed UnheardCopies copies
	stalls   uint64       // masters dropped for MaxRenames copies without progress
	stalled  []netip.Addr // their addresses, until the server takes them
}

// add queues a client that asked; an address already queued takes the
// new port (its socket reopened), and as the head it must be named again.
func (m *masters) add(from netip.AddrPort, now time.Time) {
	for i, q := range m.queue {
		if q.Addr() == from.Addr() {
			m.queue[i] = from
			if i == 0 {
				m.named, m.ackAt = time.Time{}, time.Time{}
			}
			return
		}
	}
	m.queue = append(m.queue, from)
	if len(m.queue) == 1 {
		m.promote(now)
	}
}

func (m *masters) promote(now time.Time) {
	m.since, m.named, m.ackAt, m.gap, m.renames, m.gapNamed, m.unheard = now, time.Time{}, time.Time{}, 0, 0, 0, 0
}

func (m *masters) pop(now time.Time) {
	m.queue = m.queue[1:]
	m.promote(now)
}

// dropBehindHead takes every client queued behind the head for gone.
func (m *masters) dropBehindHead() {
	if len(m.queue) > 1 {
		m.gone += uint64(len(m.queue) - 1)
		m.queue = m.queue[:1]
	}
}

// ack takes an ACK of block (iPXE's first missing block, 0-based: the
// 1-based count of blocks it holds in a row) from a client of a file of
// blocks blocks.
func (m *masters) ack(from netip.AddrPort, block, blocks int, now time.Time) {
	if len(m.queue) == 0 || m.queue[0] != from {
		return
	}
	if block >= blocks {
		m.wholes++
		m.pop(now)
		return
	}
	// A copy of its first missing block moves the gap by one; more than
	// that, the group brought the blocks after it.
	if block+1 > m.gapNamed+1 {
		m.renames = 0
	}
	m.ackAt, m.gap = now, block+1
}

// unicast is where the next DATA also goes, to make or keep the head the
// master; false when it needs no copy. A head silent for Silence is
// dropped first.
func (m *masters) unicast(now time.Time) (netip.AddrPort, bool) {
	m.dropSilent(now)
	if len(m.queue) == 0 || now.Sub(m.ackAt) < NameEvery || now.Sub(m.named) < NameEvery {
		return netip.AddrPort{}, false
	}
	if m.ackAt.IsZero() {
		if m.unheard == UnheardCopies {
			m.gone++
			m.pop(now)
			return m.unicast(now)
		}
		m.unheard++
	} else if !m.named.IsZero() {
		if m.renames++; m.renames > MaxRenames {
			m.stalls++
			m.stalled = append(m.stalled, m.queue[0].Addr())
			m.pop(now)
			return m.unicast(now)
		}
	}
	m.named, m.gapNamed = now, m.gap
	return m.queue[0], true
}

// dropSilent drops heads that have not ACKed for Silence since they
// became the head or last ACKed.
func (m *masters) dropSilent(now time.Time) {
	for len(m.queue) > 0 {
		last := m.ackAt
		if last.IsZero() {
			last = m.since
		}
		if now.Sub(last) < Silence {
			break
		}
		m.pop(now)
	}
}

// owe is what the carousel owes once a cycle is done: from the master's
// first gap to the end when it ACKed, else nothing. Every client in the
// queue asked at least a full cycle ago (each RRQ owes one), so a head
// not heard from is more likely whole than not: it is named with copies
// while the carousel idles (unicast), which costs a datagram where a
// cycle per client kept a storm's group busy long after its machines
// had booted.
func (m *masters) owe(c *carousel, now time.Time) {
	m.dropSilent(now)
	if len(m.queue) > 0 && m.gap > 0 {
		c.next, c.left = m.gap, c.blocks-m.gap+1
	}
}
