package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// DHCPPeersConfig configures a DHCPPeers.
type DHCPPeersConfig struct {
	View  *View  // required: the servers table as last read, memory only
	Scope string // this server's dhcplb.Scope
	// Wait is the secs threshold of dhcplb.Assignment.Decide. Default
	// dhcplb.DefaultWait; negative turns the cover for waiting clients off.
	Wait time.Duration
	// Every is how often the picture is rebuilt from View. Default 1 s;
	// View itself is read from the store every few seconds.
	Every  time.Duration
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default: discard
}

// DHCPPeers keeps the current dhcplb.Assignment of this server's LAN: the
// servers of the table that registered the same scope, live or stale.
// The DHCP server reads it on every packet (dhcp.Peers).
type DHCPPeers struct {
	cfg   DHCPPeersConfig
	log   *slog.Logger
	cur   atomic.Pointer[dhcplb.Assignment]
	peers string // the last membership logged
}

// NewDHCPPeers returns a DHCPPeers that sees this server alone until Run
// (or Update) reads the view.
func NewDHCPPeers(cfg DHCPPeersConfig) *DHCPPeers {
	if cfg.Wait == 0 {
		cfg.Wait = dhcplb.DefaultWait
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Alone is logged only when it follows company.
	w := &DHCPPeers{cfg: cfg, log: cfg.Logger, peers: "|"}
	w.cur.Store(dhcplb.Assign(cfg.View.Self(), nil, 0))
	return w
}

// Assignment is the current picture; the packet path calls it.
func (w *DHCPPeers) Assignment() *dhcplb.Assignment { return w.cur.Load() }

// Run rebuilds the picture every Every until ctx is done; it returns nil.
func (w *DHCPPeers) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Every)
	defer t.Stop()
	for {
		w.Update()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Update rebuilds the picture from the view now.
func (w *DHCPPeers) Update() {
	now := w.cfg.Now()
	var others []dhcplb.Member
	for _, s := range w.cfg.View.Servers() {
		if s.Name == w.cfg.View.Self() || !slices.Contains(s.Addrs, w.cfg.Scope) {
			continue
		}
		switch s.Status(now) {
		case inventory.ServerLive:
			others = append(others, dhcplb.Member{Name: s.Name, Live: true})
		case inventory.ServerStale:
			others = append(others, dhcplb.Member{Name: s.Name})
		}
	}
	wait := uint16(0)
	if w.cfg.Wait > 0 {
		wait = uint16(min(max(w.cfg.Wait/time.Second, 1), 0xffff))
	}
	w.cur.Store(dhcplb.Assign(w.cfg.View.Self(), others, wait))
	w.logChange(others)
}

// logChange logs the servers sharing the LAN when they change.
func (w *DHCPPeers) logChange(others []dhcplb.Member) {
	var live, stale []string
	for _, m := range others {
		if m.Live {
			live = append(live, m.Name)
		} else {
			stale = append(stale, m.Name)
		}
	}
	key := strings.Join(live, ",") + "|" + strings.Join(stale, ",")
	if key == w.peers {
		return
	}
	w.peers = key
	if len(others) == 0 {
		w.log.Info("dhcp: no other server answers DHCP on this LAN; answering every client", "scope", w.cfg.Scope)
		return
	}
	w.log.Info("dhcp: sharing this LAN's clients by RFC 3074 hash", "scope", w.cfg.Scope,
		"live_peers", live, "stale_peers", stale, "wait_secs", w.cur.Load().WaitSecs())
}
