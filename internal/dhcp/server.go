package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/ipv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// Server is a DHCPv4 server on one interface. Create it with New, start it
// with Run.
type Server struct {
	cfg   Config
	log   *slog.Logger
	alloc *allocator // nil in proxy mode
	now   func() time.Time
	limit clientLimiter
}

// New checks cfg, fills its defaults (ServerIP and Netmask from the
// interface when unset) and, in full mode, loads the persisted leases. It
// opens no sockets; Run does.
func New(cfg Config) (*Server, error) {
	if err := cfg.fromInterface(); err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "dhcp"), now: time.Now}
	if cfg.Mode == ModeFull {
		store := cfg.LeaseStore
		switch {
		case store != nil:
		case cfg.LeaseFile != "":
			store = NewFileStore(cfg.LeaseFile)
		default:
			s.log.Warn("dhcp leases are kept in memory only; a restart may hand out an address twice",
				"fix", "set the data directory")
			store = NewMemStore()
		}
		s.alloc = newAllocator(&s.cfg, store)
		n, err := s.alloc.load(context.Background())
		if err != nil {
			return nil, fmt.Errorf("dhcp: load leases: %w", err)
		}
		s.log.Info("dhcp leases loaded", "count", n, "file", cfg.LeaseFile)
		held, err := s.alloc.loadHolds()
		if err != nil {
			return nil, fmt.Errorf("dhcp: %w", err)
		}
		if held > 0 {
			s.log.Info("dhcp decline holds restored", "addresses", held, "file", cfg.HoldFile)
		}
	}
	return s, nil
}

// Run serves until ctx is done, then closes its sockets and returns nil. It
// returns an error if a socket cannot be opened (port in use, no such
// interface, not root) or fails while serving.
func (s *Server) Run(ctx context.Context) error {
	ports := []int{s.cfg.Port}
	if s.cfg.Mode == ModeProxy {
		ports = append(ports, bsPort(s.cfg.Port))
	}
	var conns []*net.UDPConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, p := range ports {
		c, err := listenUDP(ctx, s.cfg.Interface, p)
		if err != nil {
			closeAll()
			return fmt.Errorf("dhcp: %w", err)
		}
		conns = append(conns, c)
	}
	s.log.Info("dhcp serving", "mode", s.cfg.Mode.String(), "interface", s.cfg.Interface,
		"server_ip", s.cfg.ServerIP.String(), "ports", ports)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- s.serve(ctx, c, i > 0)
		}()
	}
	if s.alloc != nil && s.cfg.Peers != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runShared(ctx)
		}()
	}
	if s.alloc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Minute)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.alloc.gc(s.now())
				}
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	closeAll()
	wg.Wait()
	return err
}

// workers is how many packets are handled at once. A REQUEST waits for its
// lease to be durable (an fsync); while it waits, other packets are decoded
// and answered, and their leases join the same group commit. The allocator
// keeps lease decisions consistent whatever the order.
const workers = 256

// serve reads packets until the socket is closed and hands them to a pool
// of workers. When all are busy it stops reading, and the socket buffer
// absorbs (or the kernel drops) the excess: clients retransmit.
func (s *Server) serve(ctx context.Context, c *net.UDPConn, bs bool) error {
	ch := make(chan datagram, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range ch {
				s.handlePacket(ctx, c, p.b, p.peer, p.dst, bs)
			}
		}()
	}
	defer func() {
		close(ch)
		wg.Wait()
	}()
	// Where each packet was sent tells a RENEW to this server from a
	// broadcast REBIND, which load balancing treats differently.
	pc := ipv4.NewPacketConn(c)
	if pc.SetControlMessage(ipv4.FlagDst, true) != nil {
		pc = nil
	}
	buf := make([]byte, 4096)
	for {
		p, err := readPacket(c, pc, buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcp: read on %s: %w", s.cfg.Interface, err)
		}
		ch <- p
	}
}

// datagram is one packet read from a socket.
type datagram struct {
	b    []byte
	peer *net.UDPAddr
	dst  net.IP // where it was sent; nil when unknown
}

// readPacket reads one datagram, with its destination address when pc
// (c with IP_PKTINFO on) is set.
func readPacket(c *net.UDPConn, pc *ipv4.PacketConn, buf []byte) (datagram, error) {
	var out datagram
	if pc == nil {
		n, peer, err := c.ReadFromUDP(buf)
		if err != nil {
			return out, err
		}
		out.b, out.peer = append([]byte(nil), buf[:n]...), peer
		return out, nil
	}
	n, cm, src, err := pc.ReadFrom(buf)
	if err != nil {
		return out, err
	}
	out.b = append([]byte(nil), buf[:n]...)
	out.peer, _ = src.(*net.UDPAddr)
	if cm != nil {
		out.dst = cm.Dst
	}
	return out, nil
}

// handlePacket is the per-packet boundary: whatever happens inside, the
// server survives to read the next packet.
func (s *Server) handlePacket(ctx context.Context, c *net.UDPConn, b []byte, peer *net.UDPAddr, dst net.IP, bs bool) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("dhcp packet handler panicked; packet dropped", "peer", peer, "len", len(b),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	start := time.Now()
	out, why := s.processTo(ctx, b, peer, dst, bs)
	if out.msg == nil {
		s.log.Debug("dhcp packet dropped", "peer", peer, "len", len(b), "reason", why)
		return
	}
	if _, err := c.WriteToUDP(out.msg.ToBytes(), out.dest); err != nil {
		s.log.Warn("dhcp reply not sent", "mac", out.msg.ClientHWAddr.String(), "dest", out.dest, "err", err)
		return
	}
	if s.cfg.OnReply != nil {
		m := out.msg
		s.cfg.OnReply(Reply{MAC: m.ClientHWAddr, Request: out.reqType, Type: m.MessageType(),
			Addr: m.YourIPAddr, BootFile: bootFile(m), VendorClass: string(m.Options.Get(dhcpv4.OptionClassIdentifier)),
			Took: time.Since(start)})
	}
}

// process decodes, validates and answers one packet; it is the whole server
// minus the socket, which is what the golden and fuzz tests drive.
func (s *Server) process(ctx context.Context, b []byte, peer *net.UDPAddr, bs bool) (reply, string) {
	return s.processTo(ctx, b, peer, nil, bs)
}

// processTo is process for a packet sent to dst (nil: unknown, taken as
// broadcast).
func (s *Server) processTo(ctx context.Context, b []byte, peer *net.UDPAddr, dst net.IP, bs bool) (reply, string) {
	m, err := dhcpv4.FromBytes(b)
	if err != nil {
		return reply{}, "undecodable: " + err.Error()
	}
	t, err := validate(m)
	if err != nil {
		return reply{}, err.Error()
	}
	if ok, first := s.limit.allow(m.ClientHWAddr, s.now()); !ok {
		if first {
			s.log.Warn("dhcp client sends too fast; dropping its packets until it slows down",
				"mac", m.ClientHWAddr.String(), "type", t.String(), "limit_per_second", perClientRate, "burst", perClientBurst)
		}
		return reply{}, "client over its rate limit"
	}
	c := pxe.Detect(m)
	unicast := dst != nil && dst.Equal(s.cfg.ServerIP) && m.GatewayIPAddr.IsUnspecified()
	req := request{msg: m, typ: t, client: c, peer: peer, bsPort: bs, unicast: unicast}
	if s.cfg.Observer != nil && s.observes(req) {
		s.cfg.Observer.DHCPPacket(m.ClientHWAddr, t, c)
	}
	r, why := s.handle(ctx, req)
	r.reqType = t
	return r, why
}
