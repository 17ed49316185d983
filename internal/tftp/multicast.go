package tftp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// RFC 2090 multicast TFTP.
//
// Clients that ask for the same file (same block size, same server
// address) while a transfer of it runs share one session: one socket, one
// group. Every client gets its OACK by unicast from the session's socket,
// so DATA from that socket to the group passes its transfer-ID check. One
// client at a time, the master, ACKs; the server sends DATA to the group in
// lockstep with it. The others only listen and keep what they receive.
// When the master has every block, or stops answering, the next client in
// line is made master by a new OACK with mc=1 and ACKs the last block it
// has in sequence; the group then carries on from there, so a late joiner
// gets the blocks it missed while everyone still waiting gets them again.
// A client already holding the whole file does not answer (iPXE has closed
// its socket by then) and is passed over after a short wait.

// defaultMulticastPort is IANA's tftp-mcast port.
const defaultMulticastPort = 1758

// promoteTries is how many OACKs a client made master gets before it is
// passed over. The first master's each wait Config.Timeout, later ones
// twice the masters' retransmission timeout, at least minPromoteWait.
const (
	promoteTries   = 3
	minPromoteWait = 100 * time.Millisecond
)

// errSilent is a client that never answered the OACK making it master.
var errSilent = errors.New("did not answer when made master")

type mcastKey struct {
	file  string
	mode  string
	blk   int
	local string
}

// mcastClient is one client of a session.
type mcastClient struct {
	addr   *net.UDPAddr
	base   []Option // the client's granted options, under its spelling
	st     TransferStats
	kicked atomic.Bool // it repeated its RRQ: resend its OACK now
	done   func()      // reports st; set by the session
}

// mcastSession sends one file to one group. Its queue is guarded by the
// Server's mcMu.
type mcastSession struct {
	srv   *Server
	key   mcastKey
	conn  *net.UDPConn
	group netip.AddrPort
	out   *groupWriter
	file  File
	size  int64
	total uint64
	start time.Time

	queue  []*mcastClient // queue[0] is master or next to be
	master atomic.Pointer[mcastClient]
	served int // clients taken from the queue
}

// groupWriter sends DATA to the group and counts what it sent.
type groupWriter struct {
	conn    *net.UDPConn
	dst     *net.UDPAddr
	buf     []byte
	packets int64
	bytes   int64 // file bytes, headers not counted
}

func (g *groupWriter) writeData(pkts []dataPacket) error {
	for i := range pkts {
		g.buf = append(append(g.buf[:0], pkts[i].hdr[:]...), pkts[i].payload...)
		if _, err := g.conn.WriteToUDP(g.buf, g.dst); err != nil && !isTransient(err) {
			return fmt.Errorf("sending DATA to group %v: %w", g.dst, err)
		}
		g.packets++
		g.bytes += int64(len(pkts[i].payload))
	}
	return nil
}

// masterConn is the session socket as the master's transfer sees it:
// reads skip datagrams from anyone else, writes go to the master.
type masterConn struct {
	conn *net.UDPConn
	peer *net.UDPAddr
}

func (c masterConn) Read(b []byte) (int, error) {
	for {
		n, from, err := c.conn.ReadFromUDP(b)
		if err != nil {
			return n, err
		}
		if from.Port == c.peer.Port && from.IP.Equal(c.peer.IP) {
			return n, nil
		}
	}
}

func (c masterConn) Write(b []byte) (int, error) { return c.conn.WriteToUDP(b, c.peer) }

func (c masterConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// serveMulticast runs the request as part of an RFC 2090 session. If a
// session for the file runs, the client joins it and serveMulticast
// returns at once; otherwise this call runs a new session, the client its
// first master, until the queue is empty. It returns false, having done
// nothing, when no group is free or the session socket cannot be opened:
// the caller then serves the client by unicast.
func (s *Server) serveMulticast(ctx context.Context, req *Request, local net.IP, remote net.Addr, data File, p params, at *activeTransfer, st TransferStats) bool {
	raddr, ok := remote.(*net.UDPAddr)
	if !ok || local.To4() == nil {
		return false
	}
	key := mcastKey{file: req.Filename, mode: req.Mode, blk: p.blockSize, local: local.String()}
	c := &mcastClient{addr: raddr, base: p.oack, st: st}
	c.st.Filename = req.Filename
	s.mcMu.Lock()
	if m := s.sessions[key]; m != nil {
		m.join(c)
		s.mcMu.Unlock()
		return true
	}
	group, ok := s.allocGroup(key)
	if !ok {
		s.mcMu.Unlock()
		s.log.Info("tftp: every multicast group is busy; serving by unicast", "remote", remote, "file", req.Filename)
		return false
	}
	m, err := s.newSession(key, local, group, data)
	if err != nil {
		delete(s.groups, group.Addr())
		s.mcMu.Unlock()
		s.log.Warn("tftp: cannot open a multicast session; serving by unicast", "remote", remote, "file", req.Filename, "err", err)
		return false
	}
	s.sessions[key] = m
	m.queue = append(m.queue, c)
	s.mcMu.Unlock()
	at.onRepeat(func() {
		s.mcMu.Lock()
		m.repeat(raddr)
		s.mcMu.Unlock()
	})
	m.run(ctx)
	return true
}

// allocGroup picks a free group for key from MulticastGroups: the one its
// hash names, or the next free one. Called with mcMu held.
func (s *Server) allocGroup(key mcastKey) (netip.AddrPort, bool) {
	pfx := s.cfg.MulticastGroups
	bits := 32 - pfx.Bits()
	n := uint64(1) << min(bits, 16)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", key.local, key.file, key.blk)
	first := h.Sum64() % n
	base := pfx.Masked().Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for i := range n {
		v := b + uint32((first+i)%n)
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if !s.groups[a] {
			s.groups[a] = true
			return netip.AddrPortFrom(a, uint16(s.cfg.MulticastPort)), true
		}
	}
	return netip.AddrPort{}, false
}

// newSession opens the session's socket on local, sending to group with
// TTL 1 out of the interface that holds local.
func (s *Server) newSession(key mcastKey, local net.IP, group netip.AddrPort, data File) (*mcastSession, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: local})
	if err != nil {
		return nil, fmt.Errorf("session socket on %v: %w", local, err)
	}
	pc := ipv4.NewPacketConn(conn)
	if ifc := interfaceOf(local); ifc != nil {
		if err := pc.SetMulticastInterface(ifc); err != nil {
			conn.Close()
			return nil, fmt.Errorf("multicast interface %s: %w", ifc.Name, err)
		}
	}
	// TTL 1: the group never leaves the LAN the client asked on.
	if err := pc.SetMulticastTTL(1); err != nil {
		conn.Close()
		return nil, fmt.Errorf("multicast TTL: %w", err)
	}
	pc.SetMulticastLoopback(s.mcastLoop)
	size := data.Size()
	return &mcastSession{
		srv: s, key: key, conn: conn, group: group, file: data, size: size,
		total: uint64(size)/uint64(key.blk) + 1, start: time.Now(),
		out: &groupWriter{conn: conn, dst: net.UDPAddrFromAddrPort(group)},
	}, nil
}

func interfaceOf(ip net.IP) *net.Interface {
	ifs, _ := net.Interfaces()
	for i := range ifs {
		addrs, _ := ifs[i].Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return &ifs[i]
			}
		}
	}
	return nil
}

// oack is the OACK for c: its granted options and the group, with mc=1
// when it is to be master. Every OACK carries everything, so a client
// whose first OACK was lost still learns the size and the group.
func (m *mcastSession) oack(c *mcastClient, master bool) []byte {
	opts := append(append([]Option(nil), c.base...), Option{"multicast", mcastOption{group: m.group, master: master}.String()})
	return (&OAck{Options: opts}).Append(nil)
}

// join adds c to the queue, or, when it is queued already (its RRQ was
// repeated: the OACK was lost), resends its OACK. Called with mcMu held.
func (m *mcastSession) join(c *mcastClient) {
	for _, q := range m.queue {
		if q.addr.String() == c.addr.String() {
			m.repeat(c.addr)
			return
		}
	}
	if len(m.queue) >= m.srv.cfg.MaxTransfers {
		return // as if the RRQ were lost; the client repeats it
	}
	m.queue = append(m.queue, c)
	m.conn.WriteToUDP(m.oack(c, false), c.addr)
}

// repeat answers a repeated RRQ from addr: the master's OACK is resent
// by the session's goroutine, a waiting client's here. Called with mcMu
// held.
func (m *mcastSession) repeat(addr *net.UDPAddr) {
	if mc := m.master.Load(); mc != nil && mc.addr.String() == addr.String() {
		mc.kicked.Store(true)
		m.conn.SetReadDeadline(time.Unix(1, 0))
		return
	}
	for _, q := range m.queue {
		if q.addr.String() == addr.String() {
			m.conn.WriteToUDP(m.oack(q, false), q.addr)
		}
	}
}

// next takes the next master from the queue, or, when it is empty, ends
// the session: later requests for the file start a new one.
func (m *mcastSession) next() *mcastClient {
	s := m.srv
	s.mcMu.Lock()
	defer s.mcMu.Unlock()
	if len(m.queue) == 0 {
		delete(s.sessions, m.key)
		delete(s.groups, m.group.Addr())
		return nil
	}
	c := m.queue[0]
	m.queue = m.queue[1:]
	m.served++
	m.master.Store(c)
	return c
}

// run serves masters one after another until the queue is empty.
func (m *mcastSession) run(ctx context.Context) {
	s := m.srv
	stop := context.AfterFunc(ctx, func() { m.conn.Close() })
	defer func() {
		stop()
		m.conn.Close()
	}()
	rtt := newRTTEstimator(s.cfg.Timeout, s.cfg.MinTimeout, s.cfg.Timeout)
	var highest uint64
	for {
		c := m.next()
		if c == nil {
			break
		}
		err := m.serveMaster(c, rtt, &highest)
		if ctx.Err() != nil {
			err = fmt.Errorf("server shutting down: %w", ctx.Err())
		}
		c.st.Err = err
		c.st.Duration = time.Since(c.st.Start)
		if s.cfg.OnTransfer != nil {
			s.cfg.OnTransfer(c.st)
		}
	}
	s.log.Info("tftp: multicast transfer done", "file", m.key.file, "group", m.group, "clients", m.served,
		"blocks", m.out.packets, "bytes_sent", m.out.bytes, "size", m.size,
		"seconds", time.Since(m.start).Round(time.Millisecond).Seconds())
}

// serveMaster makes c master and sends the group what it lacks. It
// returns nil once c has acknowledged the last block.
func (m *mcastSession) serveMaster(c *mcastClient, rtt *rttEstimator, highest *uint64) error {
	s := m.srv
	c.st.Group = m.group.String()
	c.st.BlockSize, c.st.WindowSize = m.key.blk, 1
	conn := masterConn{m.conn, c.addr}
	wait := m.srv.cfg.Timeout
	if *highest > 0 {
		// A client that listened answers as fast as the masters did; one
		// that has the whole file never does, and the ones still missing
		// blocks should not wait long behind it.
		wait = min(wait, max(2*rtt.timeout(), minPromoteWait))
	}
	from, err := m.promote(c, conn, wait)
	if err != nil {
		if errors.Is(err, errSilent) {
			c.st.Silent = true
			s.log.Debug("tftp: multicast client silent when made master; it has the file or left", "remote", c.addr, "file", m.key.file)
			return nil
		}
		return err
	}
	snd := newSender(conn, m.out, m.file, m.size, m.key.blk, 1, s.cfg.Retries, s.cfg.Timeout, rtt)
	snd.acked, snd.highestSent = from, *highest
	s.log.Debug("tftp: multicast master", "remote", c.addr, "file", m.key.file, "group", m.group, "from_block", from+1)
	err = snd.run()
	*highest = max(*highest, snd.highestSent)
	c.st.Retransmits = snd.retransmits
	c.st.Bytes = min(int64(snd.acked)*int64(m.key.blk), m.size)
	if errors.Is(err, errGiveUp) {
		s.log.Warn("tftp: multicast master stopped answering; passing the group on", "remote", c.addr, "file", m.key.file, "err", err)
	}
	return err
}

// promote sends c the OACK that makes it master and returns the block
// its answer acknowledges: 0 from a new client, the last block it has in
// sequence from one that listened.
func (m *mcastSession) promote(c *mcastClient, conn masterConn, wait time.Duration) (uint64, error) {
	oack := m.oack(c, true)
	buf := make([]byte, 1024)
	for try := 0; try < promoteTries; {
		if _, err := conn.Write(oack); err != nil && !isTransient(err) {
			return 0, fmt.Errorf("sending OACK: %w", err)
		}
		try++
		conn.SetReadDeadline(time.Now().Add(wait))
		for {
			if c.kicked.Swap(false) {
				try-- // a repeated RRQ, not a timeout: the OACK was lost
				break
			}
			n, err := conn.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if c.kicked.Swap(false) {
					try--
				}
				break
			}
			if err != nil {
				return 0, err
			}
			p, err := ParsePacket(buf[:n])
			if err != nil {
				continue
			}
			switch p := p.(type) {
			case *Error:
				return 0, clientError{p}
			case *Ack:
				if uint64(p.Block) <= m.total {
					return uint64(p.Block), nil
				}
			}
		}
	}
	return 0, errSilent
}
