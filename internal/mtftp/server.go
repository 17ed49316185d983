package mtftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sync/errgroup"

	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// DefaultPort is where iPXE sends MTFTP requests (its MTFTP_PORT).
const DefaultPort = 1759

// DefaultGroup is where every iPXE listens for MTFTP DATA.
var DefaultGroup = netip.MustParseAddrPort("239.255.1.1:3001")

// maxOpening bounds the RRQs whose file is being opened at once; more are
// dropped, and their clients ask again when their timer runs out. Opening
// an image's kernel waits for its build.
const maxOpening = 32

// Config sets up a Server. FS and Listen are required.
type Config struct {
	// FS is where files come from: the TFTP server's, so iPXE's fallback
	// to plain TFTP for the same path gets the same bytes.
	FS tftp.FileSystem
	// Listen is the request socket's address: the server's IPv4 address
	// and the MTFTP port (DefaultPort). The data socket binds the same
	// address, on a port of the kernel's choosing.
	Listen netip.AddrPort
	// Group is where DATA goes; default DefaultGroup.
	Group netip.AddrPort
	// Interface sends to the group; nil leaves it to the routing table.
	Interface *net.Interface
	// TTL of DATA; default 1, the local segment.
	TTL int
	// Rate is the most the carousel sends, in bytes per second on the
	// wire (mcast.WireOverhead counted); required.
	Rate int64
	// Now is the clock of ownership; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Stats are the Server's counters since it started.
type Stats struct {
	Bytes     uint64 // file bytes in DATA sent to the group
	Datagrams uint64 // DATA datagrams sent
	Cycles    uint64 // full cycles of a file sent
	Requests  uint64 // RRQs received
	Clients   uint64 // distinct client addresses that sent an RRQ
	Errors    uint64 // ERRORs sent
	Unicasts  uint64 // DATA copies sent to a client to make it the master
	Stalls    uint64 // masters that got nothing from the group (MaxRenames)
}

// Server is an MTFTP responder. Grant may be called before Run.
type Server struct {
	cfg   Config
	log   *slog.Logger
	owner owner
	kick  chan struct{}

	mu      sync.Mutex
	file    tftp.File // the carousel's file, open while it sends
	path    string
	car     carousel
	masters masters // clients of the run not known to hold the file; the first ACKs
	// stalledAt is when a master last stalled (MaxRenames): the group
	// does not reach iPXE here, and Grant refuses for StallHold.
	stalledAt time.Time
	runStalls uint64    // masters.stalls of this run already logged
	idleSince time.Time // when the running carousel last found nothing owed; zero while it sends
	// unreached is when each client the group did not reach stalled as
	// master; its RRQs get an ERROR for StallHold.
	unreached map[netip.Addr]time.Time
	askers    map[netip.Addr]bool // clients of the current run, for the log
	clients   map[netip.Addr]bool

	bytes, datagrams, cycles, requests, errs, unicasts, stallCount atomic.Uint64
}

// New returns a Server for c.
func New(c Config) *Server {
	if !c.Group.IsValid() {
		c.Group = DefaultGroup
	}
	if c.TTL == 0 {
		c.TTL = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: c, log: log, owner: owner{now: c.Now}, kick: make(chan struct{}, 1),
		clients: map[netip.Addr]bool{}, unreached: map[netip.Addr]time.Time{}}
}

// unreachedLately reports whether the group failed addr as master within
// StallHold, forgetting those longer ago.
func (s *Server) unreachedLately(addr netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	for a, at := range s.unreached {
		if now.Sub(at) >= StallHold {
			delete(s.unreached, a)
		}
	}
	_, ok := s.unreached[addr]
	return ok
}

// Grant says whether a script may name mtftp:// for path, a file of
// size bytes (negative: not known yet; the RRQ checks it): true when path
// owns the group now or the group is free, which makes path its owner. It
// renews path's ownership, for Lapse.
func (s *Server) Grant(path string, size int64) bool {
	if size > MaxSize {
		return false
	}
	s.mu.Lock()
	stalled := !s.stalledAt.IsZero() && s.cfg.Now().Sub(s.stalledAt) < StallHold
	s.mu.Unlock()
	if stalled {
		return false
	}
	return s.owner.grant(path)
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	clients := len(s.clients)
	cycles := s.cycles.Load() // the runs ended, and the one running:
	if s.file != nil {
		cycles += s.car.cycles
	}
	s.mu.Unlock()
	return Stats{Bytes: s.bytes.Load(), Datagrams: s.datagrams.Load(), Cycles: cycles,
		Requests: s.requests.Load(), Clients: uint64(clients), Errors: s.errs.Load(), Unicasts: s.unicasts.Load(),
		Stalls: s.stallCount.Load()}
}

// Run serves until ctx ends; it fails if a socket cannot be opened or
// fails.
func (s *Server) Run(ctx context.Context) error {
	req, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(s.cfg.Listen))
	if err != nil {
		return fmt.Errorf("mtftp: listen on %v: %w (is the port taken? set multicast.mtftp_port, or multicast.mtftp: off)", s.cfg.Listen, err)
	}
	return s.Serve(ctx, req)
}

// Serve is Run on a request socket the caller opened; it closes req.
func (s *Server) Serve(ctx context.Context, req *net.UDPConn) error {
	defer req.Close()
	data, err := s.dataSocket()
	if err != nil {
		return err
	}
	defer data.Close()
	g, gctx := errgroup.WithContext(ctx)
	go func() {
		<-gctx.Done()
		req.Close()
		data.Close()
	}()
	g.Go(func() error { return s.readRequests(gctx, req, data) })
	g.Go(func() error { return s.readACKs(gctx, data) })
	g.Go(func() error { return s.send(gctx, data) })
	err = g.Wait()
	s.stop()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// dataSocket is the one source of every DATA and ERROR: iPXE takes the
// first packet's source as its peer and drops packets from any other.
func (s *Server) dataSocket() (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: s.cfg.Listen.Addr().AsSlice()})
	if err != nil {
		return nil, fmt.Errorf("mtftp: data socket on %v: %w", s.cfg.Listen.Addr(), err)
	}
	pc := ipv4.NewPacketConn(conn)
	if err := pc.SetMulticastTTL(s.cfg.TTL); err != nil {
		conn.Close()
		return nil, fmt.Errorf("mtftp: multicast TTL %d: %w", s.cfg.TTL, err)
	}
	if s.cfg.Interface != nil {
		if err := pc.SetMulticastInterface(s.cfg.Interface); err != nil {
			conn.Close()
			return nil, fmt.Errorf("mtftp: send the group out of %s: %w (set interface, or multicast.mtftp: off)", s.cfg.Interface.Name, err)
		}
	}
	return conn, nil
}

// readACKs reads what clients send the data socket: ACKs of the master
// client (master.go) say what it lacks; the rest is ignored.
func (s *Server) readACKs(ctx context.Context, conn *net.UDPConn) error {
	b := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(b)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTransient(err) {
				continue
			}
			return fmt.Errorf("mtftp: data socket: %w", err)
		}
		if n < 4 || binary.BigEndian.Uint16(b) != uint16(tftp.OpACK) {
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		s.mu.Lock()
		if s.file != nil {
			s.masters.ack(from, int(binary.BigEndian.Uint16(b[2:])), s.car.blocks, s.cfg.Now())
			if len(s.masters.queue) == 0 {
				s.car.left = 0 // the last who asked holds the file
			}
		}
		idle := s.car.left == 0
		s.mu.Unlock()
		if idle {
			// An idle carousel learns at once what the ACK owes, or
			// names the next head.
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}

func (s *Server) readRequests(ctx context.Context, req, data *net.UDPConn) error {
	sem := make(chan struct{}, maxOpening)
	b := make([]byte, 1500)
	for {
		n, from, err := req.ReadFromUDPAddrPort(b)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTransient(err) {
				continue
			}
			return fmt.Errorf("mtftp: request socket: %w", err)
		}
		s.requests.Add(1)
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		s.mu.Lock()
		s.clients[from.Addr()] = true
		s.mu.Unlock()
		path, err := parseRRQ(b[:n])
		if err != nil {
			s.log.Debug("mtftp: request refused", "remote", from, "err", err)
			s.sendError(data, from, tftp.ErrCodeIllegalOperation, err.Error())
			continue
		}
		select {
		case sem <- struct{}{}:
			go func() {
				defer func() { <-sem }()
				s.request(data, from, path)
			}()
		default:
			s.log.Warn("mtftp: too many requests at once; dropped one, the client will ask again", "remote", from, "file", path)
		}
	}
}

// request answers one RRQ: the owner's carousel owes a cycle, any other
// file gets an ERROR.
func (s *Server) request(data *net.UDPConn, from netip.AddrPort, path string) {
	s.mu.Lock()
	running := s.file != nil && s.path == path
	s.mu.Unlock()
	var f tftp.File
	if !running {
		var err error
		if f, err = s.cfg.FS.Open(path); err != nil {
			s.log.Warn("mtftp: file refused", "remote", from, "file", path, "err", err)
			s.sendError(data, from, tftp.ErrCodeFileNotFound, "no such file: "+path)
			return
		}
		if size := f.Size(); size > MaxSize {
			f.Close()
			s.sendError(data, from, tftp.ErrCodeAccessViolation,
				fmt.Sprintf("%s is %d bytes; MTFTP sends at most %d; fetch it by TFTP or HTTP", path, size, MaxSize))
			return
		}
	}
	if s.unreachedLately(from.Addr()) {
		// Named master again, it would get copies and no group, stall
		// and ask again, round and round; refused, its script takes the
		// next URL.
		s.sendError(data, from, tftp.ErrCodeAccessViolation, "the MTFTP group does not reach you (a master client got only unicast copies); fetch "+path+" by TFTP or HTTP")
		if f != nil {
			f.Close()
		}
		return
	}
	if !s.owner.grant(path) {
		if f != nil {
			f.Close()
		}
		s.sendError(data, from, tftp.ErrCodeAccessViolation, "the MTFTP group is sending another file; fetch "+path+" by TFTP or HTTP")
		return
	}
	s.mu.Lock()
	// grant refuses another file while the carousel runs, so a running
	// carousel sends path.
	if s.file == nil {
		if f == nil { // its carousel stopped between the check and here
			s.mu.Unlock()
			s.request(data, from, path)
			return
		}
		s.file, s.path, s.car, s.askers, s.masters, s.runStalls, s.idleSince = f, path, newCarousel(f.Size()), map[netip.Addr]bool{}, masters{}, 0, time.Time{}
		f = nil
		s.owner.sending(true)
		s.log.Info(fmt.Sprintf("mtftp: sending %s to %v for 1 clients", path, s.cfg.Group), "file", path, "group", s.cfg.Group, "remote", from)
	}
	s.askers[from.Addr()] = true
	s.car.want()
	s.masters.add(from, s.cfg.Now())
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sendBatch is the most DATA blocks taken under one lock, read with one
// read per run of consecutive blocks and sent with one sendmmsg: at 512
// bytes a block, a lock, a read and a send per block were most of what
// the carousel cost the server.
const sendBatch = 32

// send runs the carousel whenever a cycle is owed.
func (s *Server) send(ctx context.Context, conn *net.UDPConn) error {
	wire := 4 + BlockSize + mcast.WireOverhead
	burst := mcast.Burst(s.cfg.Rate, wire)
	pace := mcast.NewPacer(s.cfg.Rate, burst)
	dst := net.UDPAddrFromAddrPort(s.cfg.Group)
	batch := mcast.NewBatch(conn, min(sendBatch, int(burst)/wire), 4+BlockSize)
	blocks := make([]int, 0, sendBatch)
	run, gpkt := make([]byte, sendBatch*BlockSize), make([]byte, 4+BlockSize)
	idle := time.NewTimer(NameEvery)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		}
		for {
			s.mu.Lock()
			f, path := s.file, s.path
			blocks = blocks[:0]
			var master netip.AddrPort
			var copyTo bool
			gap := 0
			if f != nil {
				now := s.cfg.Now()
				blocks = s.takeLocked(blocks, batch.Cap(), now)
				switch {
				case len(blocks) > 0:
					s.idleSince = time.Time{}
				case s.idleSince.IsZero():
					s.idleSince = now
				case now.Sub(s.idleSince) >= Silence:
					// A client lacking blocks has heard a silent group
					// for Silence: its iPXE asked again (and is queued
					// anew) or fell back to plain TFTP. Naming the rest
					// one by one would hold the group half a second each.
					s.masters.dropBehindHead()
				}
				master, copyTo = s.masters.unicast(now)
				gap = s.masters.gap
				for _, a := range s.masters.stalled {
					s.unreached[a] = now
				}
				s.masters.stalled = s.masters.stalled[:0]
				if n := s.masters.stalls; n > s.runStalls {
					s.runStalls, s.stalledAt = n, now
					s.stallCount.Add(1)
					s.log.Warn("mtftp: a master client got nothing from the group, only the server's unicast copies: no mtftp:// in scripts for a while",
						"file", path, "group", s.cfg.Group, "hold", StallHold)
				}
			}
			if len(blocks) == 0 && f != nil && len(s.masters.queue) > 0 {
				// Idle: the head is named with a copy of its first
				// missing block (block 1 if it never said) until it
				// ACKs, which owes a pass from its gap, or is taken for
				// whole.
				gap = max(gap, 1)
				s.mu.Unlock()
				if copyTo {
					if cp, err := dataPacket(f, gpkt, gap); err == nil {
						s.nameMaster(ctx, conn, pace, master, cp)
					}
				}
				idle.Reset(NameEvery)
				select {
				case <-ctx.Done():
					return nil
				case <-s.kick:
				case <-idle.C:
				}
				continue
			}
			if len(blocks) == 0 {
				// Stopped under the lock that found nothing owed, so an
				// RRQ is either counted in this run or starts the next.
				s.stopLocked()
				s.mu.Unlock()
				break
			}
			s.mu.Unlock()
			if err := fillBatch(batch, f, run, blocks); err != nil {
				s.log.Error("mtftp: read failed; stopped sending it", "file", path, "blocks", blocks, "err", err)
				s.stop()
				break
			}
			if err := pace.Wait(ctx, batch.WireBytes()); err != nil {
				return nil
			}
			var failed error
			sentAny := false
			batch.Send(dst, func(sent int, bytes uint64, err error) {
				if err != nil {
					if failed == nil && !isTransient(err) {
						failed = err
					}
					return
				}
				sentAny = true
				s.datagrams.Add(uint64(sent))
				s.bytes.Add(bytes - 4*uint64(sent))
			})
			if failed != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("mtftp: send to %v: %w", dst, failed)
			}
			if copyTo && sentAny {
				// Not when the host refused every DATA (a firewall rule on
				// the group): a master named then would only ever get
				// copies. The copy is the block the master lacks first, when it has
				// said: so even a master the group reaches poorly moves on.
				cp := blocks[len(blocks)-1]
				if gap > 0 {
					cp = gap
				}
				if pkt, err := dataPacket(f, gpkt, cp); err == nil {
					s.nameMaster(ctx, conn, pace, master, pkt)
				}
			}
		}
	}
}

// takeLocked appends to blocks up to n blocks the carousel owes, owing
// a master's pass when a cycle ends. s.mu is held.
func (s *Server) takeLocked(blocks []int, n int, now time.Time) []int {
	for len(blocks) < n {
		block, ok := s.car.take()
		if !ok {
			s.masters.owe(&s.car, now)
			if block, ok = s.car.take(); !ok {
				break
			}
		}
		blocks = append(blocks, block)
	}
	return blocks
}

// fillBatch puts the DATA packets of blocks into batch, reading each run
// of consecutive blocks of f with one read into run, which holds
// sendBatch blocks.
func fillBatch(batch *mcast.Batch, f io.ReaderAt, run []byte, blocks []int) error {
	for i := 0; i < len(blocks); {
		j := i + 1
		for j < len(blocks) && blocks[j] == blocks[j-1]+1 {
			j++
		}
		span := run[:(j-i)*BlockSize]
		n, err := f.ReadAt(span, int64(blocks[i]-1)*BlockSize)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for k, block := range blocks[i:j] {
			data := span[min(n, k*BlockSize):min(n, (k+1)*BlockSize)]
			pkt := batch.Next()[:4]
			putDataHeader(pkt, block)
			batch.Push(append(pkt, data...))
		}
		i = j
	}
	return nil
}

// dataPacket reads block (1-based) of f into pkt, which holds 4 +
// BlockSize bytes, as a DATA packet and returns it; a read that reaches
// the file's end is no error.
func dataPacket(f io.ReaderAt, pkt []byte, block int) ([]byte, error) {
	n, err := f.ReadAt(pkt[4:4+BlockSize], int64(block-1)*BlockSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	putDataHeader(pkt, block)
	return pkt[:4+n], nil
}

// putDataHeader writes the DATA header of block (1-based; its wire number
// wraps at 65536) into pkt's first 4 bytes.
func putDataHeader(pkt []byte, block int) {
	pkt[0], pkt[1], pkt[2], pkt[3] = 0, byte(tftp.OpDATA), byte(block>>8), byte(block)
}

// nameMaster sends master a unicast copy of one DATA, which makes iPXE
// the master client: it ACKs from then on.
func (s *Server) nameMaster(ctx context.Context, conn *net.UDPConn, pace *mcast.Pacer, master netip.AddrPort, pkt []byte) {
	if pace.Wait(ctx, len(pkt)+mcast.WireOverhead) != nil {
		return
	}
	if _, err := conn.WriteToUDPAddrPort(pkt, master); err == nil {
		s.unicasts.Add(1)
	}
}

// stop ends the carousel's run: its file is closed, and the group lapses
// from now unless an RRQ renews it.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.file == nil {
		return
	}
	s.file.Close()
	s.file = nil
	s.cycles.Add(s.car.cycles)
	s.owner.sending(false)
	s.log.Info("mtftp: sent", "file", s.path, "group", s.cfg.Group, "clients", len(s.askers), "cycles", s.car.cycles,
		"masters_whole", s.masters.wholes, "taken_for_whole", s.masters.gone)
}

func (s *Server) sendError(conn *net.UDPConn, to netip.AddrPort, code tftp.ErrorCode, msg string) {
	e := tftp.Error{Code: code, Message: msg}
	if _, err := conn.WriteToUDPAddrPort(e.Append(nil), to); err == nil {
		s.errs.Add(1)
	}
}

// isTransient is an error a UDP socket may report for one datagram that
// does not break it: an ICMP error of an earlier one, a full buffer, or a
// firewall dropping the group (EPERM), when clients time out and take
// their fallback.
func isTransient(err error) bool {
	return errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EPERM) ||
		errors.Is(err, syscall.ECONNREFUSED)
}
