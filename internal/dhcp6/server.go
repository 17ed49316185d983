package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Server is a DHCPv6 server for network boot.
type Server struct {
	cfg    Config
	log    *slog.Logger
	duid   dhcpv6.DUID
	leases *leases
	macs   macCache
	now    func() time.Time
}

// New checks cfg and returns a server; Run serves it.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "dhcp6"),
		duid:   &dhcpv6.DUIDLL{HWType: 1, LinkLayerAddr: cfg.MAC},
		leases: newLeases(cfg.RangeStart, cfg.RangeEnd), now: time.Now}
	if cfg.Leases == nil || cfg.Proxy {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// process decodes and answers one datagram to port 547: the whole
// server minus the socket, which is what the tests and the fuzz target
// drive. processOn also serves BootServicePort (bsPort true).
func (s *Server) process(b []byte, peer net.IP) (*dhcpv6.Message, string) {
	return s.processOn(b, peer, false)
}

func (s *Server) processOn(b []byte, peer net.IP, bsPort bool) (*dhcpv6.Message, string) {
	d, err := dhcpv6.FromBytes(b)
	if err != nil {
		return nil, "undecodable: " + err.Error()
	}
	if d.IsRelay() {
		return nil, "relayed messages are not served yet"
	}
	m, ok := d.(*dhcpv6.Message)
	if !ok {
		return nil, fmt.Sprintf("want a client message, got %T", d)
	}
	return s.handle(m, peer, bsPort, s.now())
}

// Run serves until ctx ends: port 547 and, in proxy mode, also
// BootServicePort.
func (s *Server) Run(ctx context.Context) error {
	conn, err := listen(ctx, s.cfg.Interface, s.cfg.Port, true)
	if err != nil {
		return err
	}
	if !s.cfg.Proxy {
		s.log.Info("dhcp6 listening", "interface", s.cfg.Interface, "port", s.cfg.Port,
			"range", s.cfg.RangeStart.String()+"-"+s.cfg.RangeEnd.String())
		return s.serve(ctx, conn, false)
	}
	bs, err := listen(ctx, s.cfg.Interface, s.cfg.BootServicePort, false)
	if err != nil {
		conn.Close()
		return err
	}
	s.log.Info("dhcp6 listening in proxy mode", "interface", s.cfg.Interface, "port", s.cfg.Port,
		"boot_service_port", s.cfg.BootServicePort)
	errc := make(chan error, 1)
	go func() { errc <- s.serve(ctx, bs, true) }()
	err = s.serve(ctx, conn, false)
	return errors.Join(err, <-errc)
}

// serve answers the datagrams of conn until ctx ends.
func (s *Server) serve(ctx context.Context, conn *net.UDPConn, bsPort bool) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 4096)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcp6: read: %w", err)
		}
		out, why := s.processOn(buf[:n], from.IP, bsPort)
		if out == nil {
			s.log.Debug("dhcp6 packet dropped", "peer", from, "reason", why)
			continue
		}
		if _, err := conn.WriteToUDP(out.ToBytes(), from); err != nil {
			s.log.Warn("dhcp6 reply not sent", "peer", from, "err", err)
			continue
		}
		s.log.Debug("dhcp6 reply", "peer", from, "reply", summary(out))
	}
}
