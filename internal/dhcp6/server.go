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
	if cfg.Leases == nil {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// process decodes and answers one datagram: the whole server minus the
// socket, which is what the tests and the fuzz target drive.
func (s *Server) process(b []byte, peer net.IP) (*dhcpv6.Message, string) {
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
	return s.handle(m, peer, s.now())
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	conn, err := listen(ctx, s.cfg.Interface, s.cfg.Port)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	s.log.Info("dhcp6 listening", "interface", s.cfg.Interface, "port", s.cfg.Port,
		"range", s.cfg.RangeStart.String()+"-"+s.cfg.RangeEnd.String())
	buf := make([]byte, 4096)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcp6: read: %w", err)
		}
		out, why := s.process(buf[:n], from.IP)
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
