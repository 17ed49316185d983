package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ViewConfig configures a View.
type ViewConfig struct {
	Store inventory.Servers // required
	// Self is this server's name; Live always includes it, so a server
	// whose own heartbeat write failed still counts itself in.
	Self string
	// Interval between reads of the servers table. Default 5 s: half the
	// default heartbeat, so a server that went stale is seen within
	// StaleAfter plus Interval.
	Interval time.Duration
	// ReadTimeout bounds each read. Default 5 s, at most Interval.
	ReadTimeout time.Duration
	Now         func() time.Time // default time.Now
	Logger      *slog.Logger     // default: discard
}

// View is this server's picture of the fleet: the servers table, read
// every Interval by Run, so the hot paths that need the fleet (DHCP load
// balancing, script rendering) read memory, never the store.
type View struct {
	cfg ViewConfig
	log *slog.Logger

	mu      sync.Mutex
	servers []inventory.ServerInfo // as last read, ordered by name
	reads   uint64                 // successful reads so far
	live    string                 // the live servers at the last read: names and start times
	failed  bool                   // the last read failed (logged once per outage)
}

// NewView returns a View with nothing read yet: Live holds only Self
// until Refresh or Run reads the table.
func NewView(cfg ViewConfig) *View {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	cfg.ReadTimeout = min(cfg.ReadTimeout, cfg.Interval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &View{cfg: cfg, log: cfg.Logger}
}

// Run refreshes the view every Interval until ctx is done. A failed read
// keeps the last picture (logged once until a read succeeds again):
// losing the store must not make a server think it is alone. Run returns nil.
func (v *View) Run(ctx context.Context) error {
	every(ctx, v.cfg.Interval, v.Refresh)
	return nil
}

// Refresh reads the servers table once.
func (v *View) Refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, v.cfg.ReadTimeout)
	defer cancel()
	list, err := v.cfg.Store.ListServers(rctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		if !v.failed && ctx.Err() == nil {
			v.log.Warn("fleet: reading the servers table failed; keeping the last picture of the fleet", "err", err)
		}
		v.failed = true
		return
	}
	if v.failed {
		v.log.Info("fleet: reading the servers table works again", "servers", len(list))
	}
	v.failed = false
	v.servers = list
	v.reads++
	// Logged as it changes, a peer restarting included: a peer joining,
	// leaving or coming back shows in each log, and the e2e tests know
	// when a server's scripts name a peer.
	var names, key []string
	for _, s := range live(list, v.cfg.Now(), v.cfg.Self) {
		names = append(names, s.Name)
		key = append(key, s.Name+"@"+s.Started.String())
	}
	if k := strings.Join(key, ","); k != v.live {
		v.live = k
		v.log.Info("fleet: live servers changed", "servers", strings.Join(names, ","))
	}
}

// Reads counts the successful reads of the table, so a caller can tell
// that the picture changed.
func (v *View) Reads() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reads
}

// Self is this server's name.
func (v *View) Self() string { return v.cfg.Self }

// Live returns the live servers ordered by name, this server always
// among them (with its row if the table has it, else a row with only the
// name).
func (v *View) Live() []inventory.ServerInfo {
	now := v.cfg.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	return live(v.servers, now, v.cfg.Self)
}

// live is the servers of list live at now, and self.
func live(list []inventory.ServerInfo, now time.Time, self string) []inventory.ServerInfo {
	out := make([]inventory.ServerInfo, 0, len(list)+1)
	found := false
	for _, s := range list {
		switch {
		case s.Name == self:
			found = true
			out = append(out, s)
		case s.Status(now) == inventory.ServerLive:
			out = append(out, s)
		}
	}
	if !found && self != "" {
		out = append(out, inventory.ServerInfo{Name: self})
		slices.SortFunc(out, func(a, b inventory.ServerInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// BaseURL is the HTTP base a server registered (its first http:// or
// https:// address), or "" when it registered none.
func BaseURL(s inventory.ServerInfo) string {
	for _, a := range s.Addrs {
		if strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") {
			return a
		}
	}
	return ""
}

// Servers returns every server as last read, ordered by name, stale and
// stopped ones too, for callers that judge each row themselves (DHCP
// load balancing covers for stale servers).
func (v *View) Servers() []inventory.ServerInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.servers)
}
