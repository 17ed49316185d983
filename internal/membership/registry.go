package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/bootfleet/bootfleet/internal/buildinfo"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Counters is what a server counts anyway, read at each heartbeat.
type Counters struct {
	TFTPTransfers int    // in progress
	NBDSessions   int    // open
	BytesServed   uint64 // since the server started, all protocols; only ever grows
}

// Config configures a Registry.
type Config struct {
	Store inventory.Servers // required
	// Name is the server's name in the fleet, unique among the servers
	// sharing the store; required (config server.name, default the host
	// name).
	Name string
	// Instance tells this server's row from another's of the same name:
	// a live row is taken back only by its own instance. Default a random
	// id, so a restart waits for its old row to stop or go stale; app
	// keeps one in the data directory (LoadInstance) instead.
	Instance string
	// Addrs are where machines and peers reach the server.
	Addrs []string
	// Version defaults to buildinfo.Version().
	Version string
	// Counters is read at each heartbeat; nil reports no load.
	Counters func() Counters
	// Interval between heartbeats. Default 10 s, range 1 s to
	// inventory.StaleAfter/2, so one lost write never makes a live
	// server look stale.
	Interval time.Duration
	// WriteTimeout bounds each store write. Default 5 s, at most Interval.
	WriteTimeout time.Duration
	// Now is the clock, for tests. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger // default: discard
}

// Registry keeps one server's row in the servers table. Create it with
// New and run it with Run.
type Registry struct {
	cfg     Config
	log     *slog.Logger
	started time.Time
	// registered is false until RegisterServer succeeds, and again after
	// the row went missing.
	registered bool
	begun      bool // started and the counters' first sample are taken
	lastBytes  uint64
	lastAt     time.Time
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil {
		return nil, errors.New("membership: no store")
	}
	if !inventory.ValidServerName(cfg.Name) {
		return nil, fmt.Errorf("membership: server name %q: want letters, digits, . _ -, at most 253 characters; set server.name", cfg.Name)
	}
	if cfg.Instance == "" {
		cfg.Instance = newInstance()
	}
	if cfg.Version == "" {
		cfg.Version = buildinfo.Version()
	}
	if cfg.Counters == nil {
		cfg.Counters = func() Counters { return Counters{} }
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	cfg.Interval = max(time.Second, min(cfg.Interval, inventory.StaleAfter/2))
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	cfg.WriteTimeout = min(cfg.WriteTimeout, cfg.Interval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg, log: cfg.Logger}, nil
}

// Register registers the server before it serves. A live server of the
// same name elsewhere is an error: this one must not start. Any other
// store error is logged, and Run tries again: the fleet table must never
// stop the server from booting machines.
func (r *Registry) Register(ctx context.Context) error {
	r.begin()
	return r.beat(ctx)
}

// Run registers the server if Register did not, beats until ctx is done,
// then marks the server stopped. It returns an error only when the name
// is taken by another live server at a registration.
func (r *Registry) Run(ctx context.Context) error {
	r.begin()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var taken error
	every(ctx, r.cfg.Interval, func(ctx context.Context) {
		if taken = r.beat(ctx); taken != nil {
			cancel()
		}
	})
	r.stop()
	return taken
}

func (r *Registry) begin() {
	if r.begun {
		return
	}
	r.begun = true
	r.started = r.cfg.Now()
	r.lastAt = r.started
	r.lastBytes = r.cfg.Counters().BytesServed
}

// every runs f at once, then every interval until ctx is done: the
// heartbeat and both pictures of the fleet keep time this way.
func every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beat registers the server if it is not yet, else writes a heartbeat.
// Its error is the name taken by another live server.
func (r *Registry) beat(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	now := r.cfg.Now()
	load := r.load(now)
	if !r.registered {
		err := r.cfg.Store.RegisterServer(wctx, inventory.ServerInfo{Name: r.cfg.Name, Instance: r.cfg.Instance, Addrs: r.cfg.Addrs,
			Version: r.cfg.Version, Started: r.started, Heartbeat: now, Load: load})
		if errors.Is(err, inventory.ErrConflict) {
			return fmt.Errorf("fleet: %w", err)
		}
		if err != nil {
			r.warn(ctx, "fleet: registering this server failed; retrying at the next heartbeat", err)
			return nil
		}
		r.registered = true
		r.log.Info("fleet: registered this server", "name", r.cfg.Name, "addrs", r.cfg.Addrs, "version", r.cfg.Version)
		return nil
	}
	err := r.cfg.Store.HeartbeatServer(wctx, r.cfg.Name, r.started, now, load)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		// Someone removed the row; register again at once.
		r.registered = false
		return r.beat(ctx)
	case errors.Is(err, inventory.ErrConflict):
		r.log.Error("fleet: another server registered under this server's name; give each server its own server.name",
			"name", r.cfg.Name, "err", err)
	case err != nil:
		r.warn(ctx, "fleet: heartbeat failed; retrying at the next one", err)
	}
	return nil
}

// load samples the counters; bytes/s is over the time since the last sample.
func (r *Registry) load(now time.Time) inventory.ServerLoad {
	c := r.cfg.Counters()
	l := inventory.ServerLoad{TFTPTransfers: c.TFTPTransfers, NBDSessions: c.NBDSessions}
	if d := now.Sub(r.lastAt); d > 0 && c.BytesServed >= r.lastBytes {
		l.BytesPerSec = int64(float64(c.BytesServed-r.lastBytes) / d.Seconds())
	}
	r.lastBytes, r.lastAt = c.BytesServed, now
	return l
}

// stop marks the server stopped, on a context of its own: Run's is done.
func (r *Registry) stop() {
	if !r.registered {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.WriteTimeout)
	defer cancel()
	if err := r.cfg.Store.StopServer(ctx, r.cfg.Name, r.started, r.cfg.Now()); err != nil {
		r.log.Warn("fleet: marking this server stopped failed; it shows as stale in 30 s", "name", r.cfg.Name, "err", err)
	}
}

func (r *Registry) warn(ctx context.Context, msg string, err error) {
	if ctx.Err() != nil {
		return // shutting down: the write was cut short on purpose
	}
	r.log.Warn(msg, "name", r.cfg.Name, "err", err)
}

// HostName is the default server name: the host name, as `hostname`
// prints it.
func HostName() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("server name: reading the host name: %w; set server.name", err)
	}
	if !inventory.ValidServerName(h) {
		return "", fmt.Errorf("server name: the host name %q is not a valid server name (letters, digits, . _ -); set server.name", h)
	}
	return h, nil
}
