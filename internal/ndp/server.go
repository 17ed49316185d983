package ndp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/net/ipv6"
)

// Config configures a Server.
type Config struct {
	// Interface is the link to answer on: the one DHCP serves. Required.
	Interface string
	// Policy tunes when to answer; its Interface, Logger and Own are set
	// by New.
	Policy PolicyConfig
	Logger *slog.Logger
	// Managed, when valid, is the prefix bootfleet's DHCPv6 server leases
	// from: advertisements then set M and O (addresses and boot options
	// from DHCPv6; iPXE starts DHCPv6 only when told so) and carry the
	// prefix, on-link and for autonomous configuration, so every host can
	// reach the server without a router. Still nobody's default router.
	Managed netip.Prefix
	// CheckEvery is how often the server checks that the interface still
	// has the index and link-local address its socket was opened with;
	// zero means DefaultCheckEvery.
	CheckEvery time.Duration
}

// DefaultCheckEvery: an interface rebuilt or IPv6 switched off and on
// (which drops the socket's group membership) is noticed within this.
const DefaultCheckEvery = 10 * time.Second

// Server answers router solicitations on one interface, as its Policy allows.
type Server struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	policy *Policy
	// reopenFirst is the first pause of openWhenReady, doubling up to
	// reopenMax; tests shorten it.
	reopenFirst time.Duration

	mu     sync.Mutex
	timers map[*time.Timer]bool
	wg     sync.WaitGroup // answers scheduled and running
	closed bool
}

// packetConn is the part of *ipv6.PacketConn the server uses.
type packetConn interface {
	ReadFrom(b []byte) (int, *ipv6.ControlMessage, net.Addr, error)
	WriteTo(b []byte, cm *ipv6.ControlMessage, dst net.Addr) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// link is the interface as the server sends on it.
type link struct {
	ifc       *net.Interface
	linkLocal netip.Addr
	conn      packetConn
}

var allNodes = netip.MustParseAddr("ff02::1")

// New checks cfg. It opens nothing: Run does.
func New(cfg Config) (*Server, error) {
	if cfg.Interface == "" {
		return nil, errors.New("ndp: no interface: set the interface DHCP listens on")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "ndp")
	s := &Server{cfg: cfg, log: log, now: time.Now, reopenFirst: time.Second, timers: map[*time.Timer]bool{}}
	pc := cfg.Policy
	pc.Interface, pc.Logger = cfg.Interface, log
	if pc.Own == nil {
		pc.Own = ownAddresses(cfg.Interface)
	}
	s.policy = NewPolicy(pc)
	return s, nil
}

// Run answers solicitations until ctx is done. Answering is an optional
// speed-up, so Run never fails. Without IPv6, a link-local address or the
// right to open a raw socket it logs one warning and tries again with
// growing pauses (up to reopenMax): a bridge has no link-local address
// until its first port has carrier, which may be after bootfleet starts.
// A socket that stops working, or an interface rebuilt under the same name
// (a new index the socket is not bound to), gets the same treatment.
func (s *Server) Run(ctx context.Context) error {
	defer s.shutdown()
	for {
		l := s.openWhenReady(ctx)
		if l == nil {
			return nil
		}
		s.log.Info("ipv6 ra: listening for router solicitations", "interface", l.ifc.Name, "address", l.linkLocal.String())
		err := s.serve(ctx, l)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("ipv6 ra: reopening the socket", "interface", l.ifc.Name, "reason", err)
	}
}

// openWhenReady opens the socket, warning once while it cannot; nil means
// ctx ended first.
func (s *Server) openWhenReady(ctx context.Context) *link {
	for wait, warned := s.reopenFirst, false; ; wait = min(2*wait, reopenMax) {
		l, err := s.open(ctx)
		if err == nil {
			return l
		}
		s.log.Debug("ipv6 ra: socket not open; trying again", "interface", s.cfg.Interface, "err", err, "in", wait.String())
		if !warned {
			warned = true
			s.log.Warn("ipv6 ra: not answering router solicitations yet; iPXE waits about 13 s for an IPv6 router at every boot until this works",
				"interface", s.cfg.Interface, "err", err, "retry_every_up_to", reopenMax.String(),
				"fix", "enable IPv6 on the interface (sysctl net.ipv6.conf."+s.cfg.Interface+".disable_ipv6=0) and run as root, or set ipv6_ra: off to silence this")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// serve reads from l until ctx ends, the socket fails, or the interface is
// no longer the one l was opened on. The check runs here, between reads,
// not in a goroutine of its own: that would look at the interfaces of
// whatever network namespace its thread happens to be in.
func (s *Server) serve(ctx context.Context, l *link) error {
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	defer l.conn.Close()
	every := s.cfg.CheckEvery
	if every <= 0 {
		every = DefaultCheckEvery
	}
	buf := make([]byte, 1500)
	checked := time.Now()
	for {
		if err := l.conn.SetReadDeadline(checked.Add(every)); err != nil {
			return fmt.Errorf("set read deadline: %w", err)
		}
		n, cm, src, err := l.conn.ReadFrom(buf)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			s.handle(l, buf[:n], cm, src)
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("read: %w", err)
		}
		if time.Since(checked) >= every {
			if err := s.sameLink(l); err != nil {
				return err
			}
			checked = time.Now()
		}
	}
}

// sameLink says why l's socket no longer serves the configured interface,
// or nil if it still does.
func (s *Server) sameLink(l *link) error {
	ifc, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("interface %s is gone: %w", s.cfg.Interface, err)
	}
	if ifc.Index != l.ifc.Index {
		return fmt.Errorf("interface %s was made again (index %d, the socket is bound to %d)", ifc.Name, ifc.Index, l.ifc.Index)
	}
	if ll, err := linkLocal(ifc); err != nil || ll != l.linkLocal {
		return fmt.Errorf("interface %s's link-local address changed from %s", ifc.Name, l.linkLocal)
	}
	return nil
}

// reopenMax is the longest pause between attempts to open the socket.
const reopenMax = 30 * time.Second

// open finds the interface's link-local address and opens the socket.
func (s *Server) open(ctx context.Context) (*link, error) {
	ifc, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return nil, err
	}
	ll, err := linkLocal(ifc)
	if err != nil {
		return nil, err
	}
	c, err := listen(ctx, ifc)
	if err != nil {
		return nil, err
	}
	return &link{ifc: ifc, linkLocal: ll, conn: c}, nil
}

// received is one packet's facts the checks need.
type received struct {
	src netip.Addr
	hop int // -1: the kernel did not say
	msg Message
}

// handle validates one packet and passes it to the policy.
func (s *Server) handle(l *link, b []byte, cm *ipv6.ControlMessage, from net.Addr) {
	r := received{hop: -1}
	if ia, ok := from.(*net.IPAddr); ok {
		r.src, _ = netip.AddrFromSlice(ia.IP)
		r.src = r.src.Unmap()
	}
	if cm != nil {
		r.hop = cm.HopLimit
		if cm.IfIndex != 0 && cm.IfIndex != l.ifc.Index {
			return // SO_BINDTODEVICE makes this impossible; be sure anyway
		}
	}
	m, err := Parse(b)
	if err != nil {
		s.log.Debug("ipv6 ra: dropped malformed packet", "src", r.src.String(), "err", err)
		return
	}
	r.msg = m
	if why := check(r); why != "" {
		s.log.Debug("ipv6 ra: dropped "+kind(m), "src", r.src.String(), "hop_limit", r.hop, "reason", why)
		if _, ra := m.(*RouterAdvertisement); ra {
			// Still a sign that something routes here: be quiet.
			s.policy.HeardAdvertisement(r.src, s.now())
		}
		return
	}
	switch m := m.(type) {
	case *RouterAdvertisement:
		s.log.Debug("ipv6 ra: heard router advertisement", "src", r.src.String(), "router_lifetime", m.RouterLifetime)
		s.policy.HeardAdvertisement(r.src, s.now())
	case *RouterSolicitation:
		now := s.now()
		at, ok, why := s.policy.Solicited(r.src, now)
		mac := m.SourceLinkLayer()
		if !ok {
			s.log.Debug("ipv6 ra: not answering router solicitation", "mac", macString(mac), "src", r.src.String(), "reason", why)
			return
		}
		s.schedule(at.Sub(now), func() { s.answer(l, r.src, mac) })
	}
}

// check applies RFC 4861's validity rules that need the IP header (sections
// 6.1.1 and 6.1.2); "" means valid.
func check(r received) string {
	if r.hop != HopLimit {
		return fmt.Sprintf("hop limit %d, want %d (RFC 4861 section 6.1: the packet did not start on this link)", r.hop, HopLimit)
	}
	switch m := r.msg.(type) {
	case *RouterSolicitation:
		if r.src.IsUnspecified() && m.SourceLinkLayer() != nil {
			return "source link-layer address option from the unspecified address (RFC 4861 section 6.1.1)"
		}
		if !r.src.IsUnspecified() && !r.src.IsLinkLocalUnicast() && !r.src.IsGlobalUnicast() {
			return "source address is not unicast"
		}
	case *RouterAdvertisement:
		if !r.src.IsLinkLocalUnicast() {
			return "source is not link-local (RFC 4861 section 6.1.2)"
		}
	}
	return ""
}

// answer sends the advertisement for one solicitation, if the policy still
// agrees: unicast to the solicitor (RFC 4861 section 6.2.6 allows it, and no
// other host hears it), or to all nodes when it has no address yet.
func (s *Server) answer(l *link, to netip.Addr, mac net.HardwareAddr) {
	ok, why := s.policy.Due(to, s.now())
	if !ok {
		s.log.Debug("ipv6 ra: not answering router solicitation", "mac", macString(mac), "src", to.String(), "reason", why)
		return
	}
	dst := to
	if !to.IsValid() || to.IsUnspecified() {
		dst = allNodes
	}
	ra := Advertisement(l.ifc.HardwareAddr)
	if s.cfg.Managed.IsValid() {
		ra.Managed, ra.Other = true, true
		ra.Options = append(ra.Options, PrefixInfoOption(s.cfg.Managed, true, true, managedLifetime))
	}
	cm := &ipv6.ControlMessage{HopLimit: HopLimit, Src: l.linkLocal.AsSlice(), IfIndex: l.ifc.Index}
	if _, err := l.conn.WriteTo(ra.Marshal(), cm, &net.IPAddr{IP: dst.AsSlice(), Zone: l.ifc.Name}); err != nil {
		s.log.Debug("ipv6 ra: send failed", "dst", dst.String(), "err", err)
		return
	}
	s.log.Debug("ipv6 ra: answered router solicitation", "mac", macString(mac), "src", to.String(), "dst", dst.String())
}

// managedLifetime is the prefix's valid and preferred lifetime, in
// seconds: long enough for a boot, short enough that hosts forget the
// prefix soon after bootfleet stops advertising it.
const managedLifetime = 1800

// Advertisement is the advertisement the server sends unless Managed is set: it says nothing
// but "a router-less link": router lifetime 0 (nobody's default router,
// RFC 4861 section 6.3.4), no prefixes (no addresses from us), M=O=0 (no
// DHCPv6 to wait for), every timer unspecified. mac, if set, goes in a
// source link-layer address option so the client needs no neighbour
// solicitation to learn it.
func Advertisement(mac net.HardwareAddr) *RouterAdvertisement {
	ra := &RouterAdvertisement{}
	if len(mac) > 0 {
		ra.Options = []Option{SourceLinkLayerOption(mac)}
	}
	return ra
}

// schedule runs fn after d unless the server shuts down first.
func (s *Server) schedule(d time.Duration, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer s.wg.Done()
		s.mu.Lock()
		delete(s.timers, t)
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			fn()
		}
	})
	s.timers[t] = true
}

// shutdown cancels scheduled answers and waits for running ones.
func (s *Server) shutdown() {
	s.mu.Lock()
	s.closed = true
	for t := range s.timers {
		if t.Stop() {
			s.wg.Done()
		}
		delete(s.timers, t)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// linkLocal is the interface's first fe80::/10 address.
func linkLocal(ifc *net.Interface) (netip.Addr, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list addresses of %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
			ip, _ := netip.AddrFromSlice(n.IP)
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no IPv6 link-local address (IPv6 disabled on it?)", ifc.Name)
}

// ownAddresses reports whether an address is on the named interface. The
// list is re-read at most every few seconds: solicitations can come fast.
func ownAddresses(name string) func(netip.Addr) bool {
	var (
		mu   sync.Mutex
		read time.Time
		own  map[netip.Addr]bool
	)
	return func(a netip.Addr) bool {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(read) > 5*time.Second {
			read, own = time.Now(), map[netip.Addr]bool{}
			if ifc, err := net.InterfaceByName(name); err == nil {
				addrs, _ := ifc.Addrs()
				for _, x := range addrs {
					if n, ok := x.(*net.IPNet); ok {
						if ip, ok := netip.AddrFromSlice(n.IP); ok {
							own[ip.Unmap()] = true
						}
					}
				}
			}
		}
		return own[a.WithZone("")]
	}
}

func kind(m Message) string {
	if m.Type() == TypeRouterSolicitation {
		return "router solicitation"
	}
	return "router advertisement"
}

func macString(mac net.HardwareAddr) string {
	if mac == nil {
		return ""
	}
	return mac.String()
}
