package tftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/admission"
)

// Config configures a Server. Zero values select the documented defaults.
type Config struct {
	// FS supplies the files. Required.
	FS FileSystem

	// Logger receives one line per refused request (Info), per abandoned
	// transfer (Warn) and per started transfer (Debug). Nothing is logged
	// per packet. Default: discard.
	Logger *slog.Logger

	// MaxBlockSize caps the blksize granted to clients (RFC 2348).
	// Default 65464; range 8..65464.
	MaxBlockSize int

	// AllowFragmentation lets blksize exceed what fits in the MTU of the
	// interface the transfer leaves by. Default false: blksize is clamped
	// so every DATA datagram fits in one frame, because with windows a lost
	// IP fragment loses the whole datagram and throughput collapses.
	AllowFragmentation bool

	// MaxWindow caps the windowsize granted to clients (RFC 7440).
	// Default 64; range 1..65535.
	MaxWindow int

	// Timeout is the initial retransmission timeout when the client sends no
	// timeout option (RFC 2349; when it does, that value is the initial
	// timeout). The timeout then adapts to the round-trip time measured in
	// each transfer. Default 1s; range 10ms..255s.
	Timeout time.Duration

	// MinTimeout is the lower bound of the adaptive retransmission timeout.
	// The upper bound is the initial timeout. Default 50ms; range 1ms..Timeout.
	MinTimeout time.Duration

	// Retries is how many consecutive timeouts in which the client said
	// nothing a transfer survives before it is abandoned; a client that
	// repeats its last ACK keeps it alive. The first two retransmissions follow the adaptive
	// timeout; later ones wait max(2*Timeout, 6s) so that clients which
	// only repeat a lost ACK when their own timer fires get the chance
	// (about 18s of silence in total by default). Default 5; range 1..100.
	Retries int

	// DisableGSO stops the sender from using UDP generic segmentation
	// offload. By default, on Linux 4.18 and later, a window's full-size
	// blocks are handed to the kernel as one datagram of up to 64 blocks
	// that is split into ordinary DATA packets on the way out, which cuts
	// the CPU cost per block several-fold; when the kernel or the route
	// refuses it, the transfer falls back to one sendmmsg message per
	// block by itself. Set it to rule GSO out when chasing a NIC driver
	// bug, or so that nftables rules on this host, which see a GSO
	// datagram before it is split, count single blocks. Default false.
	DisableGSO bool

	// MaxTransfers bounds the transfers running at once, and MaxPerClient
	// those of one client address. A request beyond either is dropped (the
	// client repeats it, as after any loss) and counted in a log line at
	// most once a second: a flood of RRQs from many ports of one host, or
	// clients that never ACK, cannot take every socket and goroutine, and
	// other machines keep booting. Defaults 1024 (range 1..65535) and 8
	// (range 1..1024): firmware runs one transfer at a time.
	MaxTransfers int
	MaxPerClient int

	// LockstepThreads bounds the lockstep transfers (windowsize 1) served
	// by blocking system calls on an OS thread of their own, which cuts the
	// server's turnaround per block (see blockingConn, Linux only). Beyond
	// it, and on other systems, they share the runtime's network poller
	// like windowed ones. Default GOMAXPROCS: a blocked thread keeps its
	// processor, so more would wait for the runtime to take one back;
	// range 1..1024, or -1 for none.
	LockstepThreads int

	// MulticastGroups, when set, turns on RFC 2090 multicast TFTP for
	// clients that ask for it (the "multicast" option, as iPXE's tftm://
	// URLs do): clients fetching one file at once share a group from this
	// prefix, one group per file being sent, sent with TTL 1 out of the
	// interface the requests came in on. It must lie in 224.0.0.0/4;
	// 239.0.0.0/8 is the administratively scoped range. Files of more than
	// 65535 blocks, and clients of IPv6, are served by unicast. Default:
	// unset, multicast off.
	MulticastGroups netip.Prefix

	// MulticastPort is the UDP port of the groups. Default 1758 (IANA's
	// tftp-mcast).
	MulticastPort int

	// OnTransfer, if set, is called once per read request after it ends:
	// completed, failed, or refused (then Err says why and Bytes is 0). It
	// runs on the transfer's goroutine and must not block for long.
	OnTransfer func(TransferStats)
}

// TransferStats describes one read request.
type TransferStats struct {
	Remote      net.Addr
	Filename    string
	Bytes       int64 // file bytes acknowledged by the client
	Start       time.Time
	Duration    time.Duration
	BlockSize   int // negotiated
	WindowSize  int // negotiated
	Retransmits int // DATA and OACK packets sent more than once
	// SizeProbe is set when the client asked for tsize, read the OACK and
	// ended the transfer with an ERROR before any data: UEFI PXE firmware
	// does this to learn a file's size before it downloads it. Err is
	// still set, but nothing went wrong.
	SizeProbe bool
	// Group is the RFC 2090 group ("239.1.2.3:1758") when the client was
	// served by multicast. Bytes then counts what it acknowledged as
	// master; blocks it only heard as a listener are not known.
	Group string
	// Silent is set for a multicast client that did not answer when made
	// master: most likely it had the whole file from the group already
	// (iPXE closes its socket then), or it had given up. Err is nil.
	Silent bool
	Err    error
}

// listenReadBuffer is the receive buffer requested for the listening
// socket; the kernel caps it at net.core.rmem_max.
const listenReadBuffer = 4 << 20

// Server is a read-only TFTP server.
type Server struct {
	cfg  Config
	log  *slog.Logger
	mtus mtuCache
	// mtuFor overrides the interface MTU lookup in tests.
	mtuFor func(net.IP) int

	mu       sync.Mutex
	active   map[string]*activeTransfer // by client address
	admit    *admission.Limiter         // MaxTransfers, MaxPerClient
	lockstep chan struct{}              // a token per LockstepThreads slot

	mcMu      sync.Mutex
	sessions  map[mcastKey]*mcastSession // multicast sessions running
	groups    map[netip.Addr]bool        // their groups
	mcastLoop bool                       // tests: deliver the groups on this host too
}

// NewServer returns a server for cfg, with defaults filled in and
// out-of-range values clamped to the nearest valid one.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.MaxBlockSize = clampDefault(cfg.MaxBlockSize, maxBlockSize, minBlockSize, maxBlockSize)
	cfg.MaxWindow = clampDefault(cfg.MaxWindow, 64, 1, maxWindowSize)
	cfg.Retries = clampDefault(cfg.Retries, 5, 1, 100)
	cfg.MaxTransfers = clampDefault(cfg.MaxTransfers, 1024, 1, 65535)
	cfg.MaxPerClient = clampDefault(cfg.MaxPerClient, 8, 1, 1024)
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	cfg.Timeout = clampDur(cfg.Timeout, 10*time.Millisecond, maxTimeoutOption*time.Second)
	if cfg.MinTimeout == 0 {
		cfg.MinTimeout = 50 * time.Millisecond
	}
	cfg.MinTimeout = clampDur(cfg.MinTimeout, time.Millisecond, cfg.Timeout)
	if cfg.LockstepThreads >= 0 {
		cfg.LockstepThreads = clampDefault(cfg.LockstepThreads, runtime.GOMAXPROCS(0), 1, 1024)
	} else {
		cfg.LockstepThreads = 0
	}
	if cfg.MulticastGroups.IsValid() && !(cfg.MulticastGroups.Addr().Is4() && cfg.MulticastGroups.Addr().IsMulticast()) {
		cfg.Logger.Warn("tftp: MulticastGroups is not an IPv4 multicast prefix; multicast off", "groups", cfg.MulticastGroups)
		cfg.MulticastGroups = netip.Prefix{}
	}
	cfg.MulticastPort = clampDefault(cfg.MulticastPort, defaultMulticastPort, 1, 65535)
	return &Server{cfg: cfg, log: cfg.Logger, active: map[string]*activeTransfer{},
		sessions: map[mcastKey]*mcastSession{}, groups: map[netip.Addr]bool{},
		admit: admission.New(cfg.MaxTransfers, cfg.MaxPerClient, cfg.Logger,
			"tftp requests dropped, too many transfers; clients repeat them"),
		lockstep: make(chan struct{}, cfg.LockstepThreads)}
}

func clampDefault(v, def, lo, hi int) int {
	if v == 0 {
		return def
	}
	return max(lo, min(v, hi))
}

// ListenAndServe listens on the IPv4 UDP address addr (":69" when empty) and
// serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if addr == "" {
		addr = ":69"
	}
	conn, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return fmt.Errorf("tftp: listen on %s: %w (is another TFTP server running, or is tftp.listen wrong?)", addr, err)
	}
	return s.Serve(ctx, conn)
}

// Serve reads requests from conn, which it takes over and closes, and runs
// each transfer on its own goroutine and socket. It returns nil once ctx is
// done and every transfer has stopped, or an error if reading conn fails.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	if s.cfg.FS == nil {
		conn.Close()
		return errors.New("tftp: Config.FS is nil; nothing to serve")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	if uc, ok := conn.(interface{ SetReadBuffer(int) error }); ok {
		// A boot storm sends hundreds of RRQs at once; the default buffer
		// (~200 KiB) overflows and clients wait seconds to repeat them.
		uc.SetReadBuffer(listenReadBuffer)
	}
	rr := newRequestReader(conn)
	buf := make([]byte, 65536)
	for {
		n, local, remote, err := rr.ReadRequest(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return fmt.Errorf("tftp: reading requests on %v: %w", conn.LocalAddr(), err)
		}
		s.handlePacket(ctx, &wg, buf[:n], local, remote)
	}
}

// handlePacket decodes a datagram sent to the listening port and starts a
// transfer or refuses it.
func (s *Server) handlePacket(ctx context.Context, wg *sync.WaitGroup, b []byte, local net.IP, remote net.Addr) {
	p, err := ParsePacket(b)
	if err != nil {
		s.log.Debug("tftp: dropped undecodable packet", "remote", remote, "err", err)
		if len(b) >= 2 && (b[1] == byte(OpRRQ) || b[1] == byte(OpWRQ)) && b[0] == 0 {
			s.refuse(local, remote, "", ErrCodeIllegalOperation, "malformed request: "+err.Error())
		}
		return
	}
	req, ok := p.(*Request)
	if !ok {
		// A stray packet on the listening port: a late ACK or an ERROR for
		// a finished transfer. Nothing to answer.
		s.log.Debug("tftp: ignored packet on the request port", "remote", remote, "op", p.Opcode())
		return
	}
	if req.Op == OpWRQ {
		s.refuse(local, remote, req.Filename, ErrCodeAccessViolation, "write requests refused: this server is read-only")
		return
	}
	key := remote.String()
	s.mu.Lock()
	if at := s.active[key]; at != nil {
		s.mu.Unlock()
		// The client repeated its RRQ: our first reply was lost. The running
		// transfer resends it; a second transfer would only collide.
		s.log.Debug("tftp: repeated request", "remote", remote, "file", req.Filename)
		at.kick()
		return
	}
	// Beyond the bounds the request is dropped, as if lost: the client
	// repeats it and gets a slot once one frees.
	release, ok := s.admit.Admit(admission.HostOf(remote))
	if !ok {
		s.mu.Unlock()
		return
	}
	at := &activeTransfer{}
	s.active[key] = at
	s.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.active, key)
			s.mu.Unlock()
			release()
		}()
		s.transfer(ctx, req, local, remote, at)
	}()
}

// Active is the number of transfers in progress. It takes one lock, so it
// is fine to poll (the fleet heartbeat reads it every 10 s).
func (s *Server) Active() int {
	n, _ := s.admit.Count("")
	return n
}

// activeTransfer lets the request loop reach a running transfer.
type activeTransfer struct {
	mu     sync.Mutex
	snd    *sender
	repeat func() // a multicast session's answer to a repeated RRQ
}

func (a *activeTransfer) onRepeat(f func()) {
	a.mu.Lock()
	a.repeat = f
	a.mu.Unlock()
}

func (a *activeTransfer) set(s *sender) {
	a.mu.Lock()
	a.snd = s
	a.mu.Unlock()
}

func (a *activeTransfer) kick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.repeat != nil:
		a.repeat()
	case a.snd != nil:
		a.snd.kick()
	}
}

// refuse answers a request with an ERROR from a fresh port and logs why.
func (s *Server) refuse(local net.IP, remote net.Addr, file string, code ErrorCode, msg string) {
	s.log.Info("tftp: request refused", "remote", remote, "file", file, "code", code, "reason", msg)
	c, err := dialTransfer(local, remote)
	if err != nil {
		s.log.Debug("tftp: cannot send error", "remote", remote, "err", err)
		return
	}
	defer c.Close()
	c.Write((&Error{Code: code, Message: msg}).Append(nil))
}

// transfer runs one read request on its own socket.
func (s *Server) transfer(ctx context.Context, req *Request, local net.IP, remote net.Addr, at *activeTransfer) {
	st := TransferStats{Remote: remote, Filename: req.Filename, Start: time.Now(), BlockSize: defaultBlockSize, WindowSize: 1}
	reported := false // by a multicast session
	defer func() {
		st.Duration = time.Since(st.Start)
		if s.cfg.OnTransfer != nil && !reported {
			s.cfg.OnTransfer(st)
		}
	}()
	conn, err := dialTransfer(local, remote)
	if err != nil {
		st.Err = fmt.Errorf("opening transfer socket: %w", err)
		s.log.Warn("tftp: transfer failed", "remote", remote, "file", req.Filename, "err", st.Err)
		return
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer func() {
		stop()
		conn.Close()
	}()
	refuse := func(code ErrorCode, reason error) {
		st.Err = reason
		s.log.Info("tftp: request refused", "remote", remote, "file", req.Filename, "code", code, "reason", reason)
		conn.Write((&Error{Code: code, Message: reason.Error()}).Append(nil))
	}

	mode := strings.ToLower(req.Mode)
	if mode != "octet" && mode != "netascii" {
		refuse(ErrCodeIllegalOperation, fmt.Errorf("transfer mode %q not supported: want octet or netascii", req.Mode))
		return
	}
	f, err := s.cfg.FS.Open(req.Filename)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			refuse(ErrCodeFileNotFound, err)
		case errors.Is(err, fs.ErrPermission):
			refuse(ErrCodeAccessViolation, err)
		default:
			refuse(ErrCodeNotDefined, fmt.Errorf("cannot open file: %w", err))
		}
		return
	}
	defer f.Close()
	var data File = f
	if mode == "netascii" {
		m, err := toNetascii(f)
		if err != nil {
			refuse(ErrCodeIllegalOperation, err)
			return
		}
		data = m
	}

	localIP := conn.LocalAddr().(*net.UDPAddr).IP
	lim := limits{maxBlockSize: s.cfg.MaxBlockSize, maxWindow: s.cfg.MaxWindow,
		multicast: s.cfg.MulticastGroups.IsValid() && localIP.To4() != nil}
	if !s.cfg.AllowFragmentation {
		lookup := s.mtus.lookup
		if s.mtuFor != nil {
			lookup = s.mtuFor
		}
		if mtu := lookup(localIP); mtu > 0 {
			lim.maxBlockSize = max(minBlockSize, min(lim.maxBlockSize, blockSizeForMTU(mtu, localIP)))
		}
	}
	p, err := negotiate(req.Options, data.Size(), lim)
	if err != nil {
		refuse(ErrCodeOptionRefused, err)
		return
	}
	st.BlockSize, st.WindowSize = p.blockSize, p.windowSize
	if p.multicast && s.serveMulticast(ctx, req, localIP, remote, data, p, at, st) {
		reported = true
		return
	}
	initial := s.cfg.Timeout
	if p.timeout > 0 {
		initial = p.timeout
	}
	rtt := newRTTEstimator(initial, min(s.cfg.MinTimeout, initial), initial)
	s.log.Debug("tftp: transfer started", "remote", remote, "local", localIP, "file", req.Filename,
		"size", data.Size(), "blksize", p.blockSize, "windowsize", p.windowSize, "options", req.Options)

	out, err := newDataWriter(conn, batchPackets(p.blockSize, p.windowSize), !s.cfg.DisableGSO)
	if err != nil {
		refuse(ErrCodeNotDefined, err)
		return
	}
	snd := newSender(conn, out, data, data.Size(), p.blockSize, p.windowSize, s.cfg.Retries, oackBackstop(initial), rtt)
	release := func() {}
	defer func() { release() }()
	if p.windowSize == 1 {
		snd.promote = func() lockstepIO {
			c, done := s.blockingSocket(ctx, conn, remote)
			if c != nil {
				release = done
			}
			return c
		}
	}
	at.set(snd)
	if p.oack != nil {
		err = snd.handshake((&OAck{Options: p.oack}).Append(nil), oackBackstop(initial))
	}
	if err == nil {
		err = snd.run()
	}
	st.Retransmits = snd.retransmits
	st.Bytes = min(int64(snd.acked)*int64(p.blockSize), data.Size())
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("server shutting down: %w", ctx.Err())
	}
	st.Err = err
	var ce clientError
	switch {
	case errors.As(err, &ce) && snd.acked == 0 && hasOption(p.oack, "tsize"):
		st.SizeProbe = true
		s.log.Debug("tftp: size probe", "remote", remote, "file", req.Filename, "err", err)
	case errors.As(err, &ce):
		// ERROR 8 after an OACK is the client declining options (RFC 2347).
		s.log.Info("tftp: transfer aborted by client", "remote", remote, "file", req.Filename, "err", err)
	case errors.Is(err, errGiveUp):
		s.log.Warn("tftp: transfer abandoned", "remote", remote, "file", req.Filename, "err", err)
		snd.conn.Write((&Error{Code: ErrCodeNotDefined, Message: "timed out waiting for ACK"}).Append(nil))
	default:
		s.log.Warn("tftp: transfer failed", "remote", remote, "file", req.Filename, "err", err)
	}
}

// blockingSocket moves a lockstep transfer's socket out of the netpoller,
// onto blocking system calls, if one of the LockstepThreads slots is free.
// It returns nil when none is, or when the move fails (the transfer then
// carries on as it was); otherwise done shuts the socket down, closes it
// and frees the slot, once the transfer is over.
func (s *Server) blockingSocket(ctx context.Context, conn *net.UDPConn, remote net.Addr) (lockstepIO, func()) {
	select {
	case s.lockstep <- struct{}{}:
	default:
		return nil, nil
	}
	c, err := detachBlocking(conn)
	if err != nil {
		<-s.lockstep
		s.log.Debug("tftp: lockstep transfer stays on the poller", "remote", remote, "err", err)
		return nil, nil
	}
	s.log.Debug("tftp: lockstep transfer on a thread of its own", "remote", remote)
	stop := context.AfterFunc(ctx, c.shutdown)
	return c, func() {
		stop()
		c.Close()
		<-s.lockstep
	}
}

func hasOption(opts []Option, name string) bool {
	for _, o := range opts {
		if strings.EqualFold(o.Name, name) {
			return true
		}
	}
	return false
}
