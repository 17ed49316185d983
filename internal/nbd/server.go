package nbd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/admission"
)

// Config tunes a Server. The zero value is usable.
type Config struct {
	// Logger receives one line per session and one per protocol violation
	// or storage error. Default: discard.
	Logger *slog.Logger
	// MaxInFlight bounds the requests of one connection that run at once.
	// Reads overlap; replies are serialized on the socket. Default 16,
	// range 1..1024.
	MaxInFlight int
	// MaxBufferBytes bounds the data buffers (read replies and write
	// payloads) one connection holds at once, and MaxClientBufferBytes
	// those all connections from one client address hold together, so
	// opening more connections does not buy more memory. A request past
	// either waits (the client stops being read) until replies leave.
	// Defaults 64 MiB and 128 MiB; each is raised to MaxPayload if
	// smaller, so one maximal request always fits.
	MaxBufferBytes       int64
	MaxClientBufferBytes int64
	// MaxConnsPerClient bounds the connections one client address holds
	// open at once, in the handshake or attached; one beyond is closed at
	// once. Default 256, range 1..65535: a machine opens one or a few, a
	// benchmark host or a NAT in front of a lab a few dozen.
	MaxConnsPerClient int
	// HandshakeTimeout bounds the whole option haggling phase, so a client
	// that connects and says nothing does not hold a goroutine forever.
	// The transmission phase has no timeout: the kernel client keeps idle
	// connections for days. Default 30 s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections still in the handshake at
	// once, and MaxHandshakesPerClient those from one client address; a
	// connection beyond either is closed at once and counted in a log
	// line a second at most. Defaults 512 (range 1..65535) and 64 (range
	// 1..4096): a booting machine opens one or a few connections, a host
	// behind a NAT or a benchmark's clients several dozen at once.
	MaxHandshakes          int
	MaxHandshakesPerClient int
	// ExportLabel says how an export name appears in log lines. Export
	// names can be credentials (bootfleet's carry a per-boot secret), so
	// the caller can redact them. Default: the name as it is.
	ExportLabel func(name string) string
	// Hook, if set, receives the statistics of every finished session.
	Hook Hook
	// ShutdownGrace is how long, once Serve's context is done, in-flight
	// replies may wait for a client that does not read them before the
	// connection is cut. Default 5 s.
	ShutdownGrace time.Duration
}

// MaxPayload is the largest READ or WRITE the server accepts (32 MiB, the
// limit proto.md recommends clients stay under). A WRITE above it is a
// protocol violation that closes the connection, since the server would
// otherwise have to swallow up to 4 GiB to stay in sync.
const MaxPayload = 32 << 20

// Server serves Exports over TCP. Create it with NewServer.
type Server struct {
	exports Exports
	cfg     Config
	log     *slog.Logger
	admit   *admission.Limiter // handshakes
	conns   *admission.Limiter // connections per client
	budgets clientBudgets
}

// NewServer returns a server for exports; cfg's zero fields get their
// documented defaults.
func NewServer(exports Exports, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 16
	}
	cfg.MaxInFlight = min(cfg.MaxInFlight, 1024)
	if cfg.MaxBufferBytes <= 0 {
		cfg.MaxBufferBytes = 64 << 20
	}
	cfg.MaxBufferBytes = max(cfg.MaxBufferBytes, MaxPayload)
	if cfg.MaxClientBufferBytes <= 0 {
		cfg.MaxClientBufferBytes = 128 << 20
	}
	cfg.MaxClientBufferBytes = max(cfg.MaxClientBufferBytes, MaxPayload)
	if cfg.MaxConnsPerClient <= 0 {
		cfg.MaxConnsPerClient = 256
	}
	cfg.MaxConnsPerClient = min(cfg.MaxConnsPerClient, 65535)
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = 512
	}
	cfg.MaxHandshakes = min(cfg.MaxHandshakes, 65535)
	if cfg.MaxHandshakesPerClient <= 0 {
		cfg.MaxHandshakesPerClient = 64
	}
	cfg.MaxHandshakesPerClient = min(cfg.MaxHandshakesPerClient, 4096)
	return &Server{exports: exports, cfg: cfg, log: cfg.Logger,
		admit: admission.New(cfg.MaxHandshakes, cfg.MaxHandshakesPerClient, cfg.Logger,
			"nbd connections closed unserved: too many handshakes at once"),
		// The total is bounded by the handshakes and by the exports'
		// own policy (bootfleet's: one machine, its lease's address).
		conns: admission.New(math.MaxInt, cfg.MaxConnsPerClient, cfg.Logger,
			"nbd connections closed unserved: too many open from one client"),
		budgets: clientBudgets{size: cfg.MaxClientBufferBytes}}
}

// Serve accepts connections on ln until ctx is done, one goroutine per
// connection. When ctx is done it stops accepting, lets every connection
// finish its in-flight requests, closes them and returns nil. It returns
// an error if ln fails for another reason. Serve closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	s.log.Info("nbd server listening", "addr", ln.Addr().String())
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("nbd: listener %s closed: %w", ln.Addr(), err)
			}
			// Out of file descriptors and the like: back off instead of
			// spinning, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("nbd accept failed; retrying", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		delay = 0
		// A connection that never finishes its handshake holds a goroutine
		// and a 64 KiB reader until HandshakeTimeout: bound how many.
		host := admission.HostOf(conn.RemoteAddr())
		open, ok := s.conns.Admit(host)
		if !ok {
			conn.Close()
			continue
		}
		release, ok := s.admit.Admit(host)
		if !ok {
			open()
			conn.Close()
			continue
		}
		detectDeadPeers(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer open()
			defer release()
			s.serveConn(ctx, conn, release)
		}()
	}
}

// serveConn runs one client session: handshake, then transmission.
func (s *Server) serveConn(ctx context.Context, conn net.Conn, handshakeDone func()) {
	start := time.Now()
	ss := &session{
		srv:           s,
		host:          admission.HostOf(conn.RemoteAddr()),
		handshakeDone: handshakeDone,
		conn:          conn,
		r:             bufio.NewReaderSize(conn, 64<<10),
		remote:        conn.RemoteAddr(),
	}
	ss.log = s.log.With("remote", addrString(ss.remote))
	// On shutdown, stop reading: the loops see the deadline error, wait for
	// in-flight requests, and close. Replies get ShutdownGrace to leave;
	// a client that does not read them would otherwise hold shutdown until
	// the dead-peer timeout.
	stop := context.AfterFunc(ctx, func() {
		conn.SetReadDeadline(time.Now())
		// Harmless if the session has ended and conn is closed by then.
		time.AfterFunc(s.cfg.ShutdownGrace, func() { conn.SetWriteDeadline(time.Now()) })
	})
	err := ss.run(ctx)
	stop()
	conn.Close()
	if ss.export != nil {
		if cerr := ss.export.Close(); cerr != nil {
			ss.log.Warn("nbd export close failed", "export", s.label(ss.exportName), "err", cerr)
		}
	}
	st := SessionStats{
		Remote:       ss.remote,
		Export:       ss.exportName,
		BytesRead:    ss.bytesRead.Load(),
		BytesWritten: ss.bytesWritten.Load(),
		Ops:          ss.ops.Load(),
		Duration:     time.Since(start),
		Err:          err,
	}
	level := slog.LevelInfo
	var perr *protocolError
	if errors.As(err, &perr) {
		level = slog.LevelWarn
	}
	ss.log.Log(context.Background(), level, "nbd session ended",
		"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten, "ops", st.Ops,
		"duration", st.Duration.Round(time.Millisecond), "err", err)
	if s.cfg.Hook != nil {
		s.cfg.Hook.OnSession(st)
	}
}

// protocolError is a violation by the client that ends the session with a
// hard disconnect (proto.md allows one on any MUST violation).
type protocolError struct{ err error }

func (e *protocolError) Error() string {
	return "protocol violation, connection closed: " + e.err.Error()
}
func (e *protocolError) Unwrap() error { return e.err }

func violation(format string, args ...any) error {
	return &protocolError{fmt.Errorf(format, args...)}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// Dead-peer detection: a client that powers off never closes its TCP
// connection, and its session would stay open (holding its overlay, and
// making `machine reset` refuse) until the kernel's default keepalive of
// two hours gave up. Probing after 5 s of silence, every 5 s, 3 times,
// ends such a session within about 20 s.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
)

func detectDeadPeers(conn net.Conn) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return
	}
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount})
	// Keepalive only probes an idle connection. A client that died with a
	// reply of ours still unacknowledged is retransmitted to for about 15
	// minutes instead; the user timeout bounds that case the same way.
	setUserTimeout(tc, keepAliveIdle+keepAliveCount*keepAliveInterval)
}

func (s *Server) label(name string) string {
	if s.cfg.ExportLabel == nil {
		return name
	}
	return s.cfg.ExportLabel(name)
}
