package dhcplb

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Scope is the address a server answering DHCP registers beside its
// others, e.g. dhcp-full://10.213.0.0/24: the mode and the LAN. Servers
// registering the same scope share the buckets; a server of the fleet
// without it (DHCP off, another LAN, another mode) owns none here.
func Scope(mode string, ip net.IP, mask net.IPMask) string {
	n := net.IPNet{IP: ip.Mask(mask), Mask: mask}
	return "dhcp-" + mode + "://" + n.String()
}

// Source is the fleet's servers table as last read
// (fleetservers.View.Servers): memory, not the store.
type Source interface {
	Servers() []inventory.ServerInfo
}

// DefaultWait is the secs value from which another server also answers
// a client, as ISC dhcpd's "load balance max seconds" default: RFC 2131
// has a client send its second DISCOVER 4 s (randomised by ±1 s) after
// the first, so a client showing 3 s has sent at least twice and its
// server did not get it what it needed; a client served at once never
// gets there.
const DefaultWait = 3 * time.Second

// WatchConfig configures a Watcher.
type WatchConfig struct {
	Source Source // required
	Self   string // this server's name
	Scope  string // this server's Scope
	// Wait is the secs threshold of Fleet.Decide. Default DefaultWait;
	// negative turns the cover for waiting clients off.
	Wait time.Duration
	// Every is how often the picture is rebuilt from Source. Default 1 s;
	// Source itself is read from the store every few seconds.
	Every  time.Duration
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default: discard
}

// Watcher keeps the current Fleet of this server's LAN.
type Watcher struct {
	cfg   WatchConfig
	log   *slog.Logger
	cur   atomic.Pointer[Fleet]
	peers string // the last membership logged
}

// NewWatcher returns a Watcher that sees this server alone until Run
// (or Update) reads the source.
func NewWatcher(cfg WatchConfig) *Watcher {
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
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
	w := &Watcher{cfg: cfg, log: cfg.Logger, peers: "|"}
	w.cur.Store(NewFleet(cfg.Self, nil, 0))
	return w
}

// Fleet is the current picture; the packet path calls it.
func (w *Watcher) Fleet() *Fleet { return w.cur.Load() }

// Run rebuilds the picture every Every until ctx is done; it returns nil.
func (w *Watcher) Run(ctx context.Context) error {
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

// Update rebuilds the picture from the source now.
func (w *Watcher) Update() {
	now := w.cfg.Now()
	var others []Member
	for _, s := range w.cfg.Source.Servers() {
		if s.Name == w.cfg.Self || !slices.Contains(s.Addrs, w.cfg.Scope) {
			continue
		}
		switch s.Status(now) {
		case inventory.ServerLive:
			others = append(others, Member{Name: s.Name, Live: true})
		case inventory.ServerStale:
			others = append(others, Member{Name: s.Name})
		}
	}
	wait := uint16(0)
	if w.cfg.Wait > 0 {
		wait = uint16(min(max(w.cfg.Wait/time.Second, 1), 0xffff))
	}
	w.cur.Store(NewFleet(w.cfg.Self, others, wait))
	w.logChange(others)
}

// logChange logs the servers sharing the LAN when they change.
func (w *Watcher) logChange(others []Member) {
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
		"live_peers", live, "stale_peers", stale, "wait_secs", w.cur.Load().wait)
}
