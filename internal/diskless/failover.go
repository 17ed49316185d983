package diskless

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/membership"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// WithFailover wraps roots so that a machine whose root can be served by
// any server of the fleet is told about all of them: for client overlays
// (inventory.ClientOverlay) the read-only base export is accepted by every
// server holding the image, so bootfleet.root= names the NBD listener of
// every server order returns, in that order, and the agent fails over
// along the list when its server dies. self is this server's name in the
// fleet; its own entry is the address roots rendered.
//
// Server-side overlays (ephemeral, persistent, none) keep naming only the
// server that rendered the script: their export and overlay exist on that
// server alone, and another server would refuse the name.
func WithFailover(roots httpboot.Roots, order membership.Order, self string, log *slog.Logger) httpboot.Roots {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &failoverRoots{Roots: roots, order: order, self: self, log: log}
}

type failoverRoots struct {
	httpboot.Roots
	order membership.Order
	self  string
	log   *slog.Logger
}

func (f *failoverRoots) IssueRoot(ctx context.Context, mac net.HardwareAddr, root inventory.Root) (httpboot.RootBoot, error) {
	b, err := f.Roots.IssueRoot(ctx, mac, root)
	if err != nil || !inventory.ClientOverlay(root.Overlay) {
		return b, err
	}
	t, err := rootarg.Parse(b.Arg)
	if err != nil {
		// Ours, so never; the script still boots from this server.
		f.log.Error("diskless root argument unreadable; naming only this server", "mac", mac.String(), "err", err)
		return b, nil
	}
	var list []rootarg.Server
	for _, s := range f.order(mac, b.SHA256) {
		addr := membership.NBDAddr(s)
		if s.Name == f.self {
			addr = t.Addr()
		}
		if sv, ok := parseServer(addr); ok && !slices.Contains(list, sv) && len(list) < rootarg.MaxServers {
			list = append(list, sv)
		}
	}
	own := rootarg.Server{Host: t.Host, Port: t.Port}
	if !slices.Contains(list, own) {
		list = append([]rootarg.Server{own}, list...)[:min(len(list)+1, rootarg.MaxServers)]
	}
	t.Host, t.Port, t.Fallbacks = list[0].Host, list[0].Port, list[1:]
	b.Arg = t.Arg()
	return b, nil
}

func parseServer(hostport string) (rootarg.Server, bool) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return rootarg.Server{}, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return rootarg.Server{}, false
	}
	return rootarg.Server{Host: host, Port: n}, true
}

// NBDPort is the port the NBD server listens on, 0 when NBD is off. The
// server registers it in the fleet (membership.NBDAddrEntry), so its
// peers can name it as a failover server.
func (s *Service) NBDPort() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}
