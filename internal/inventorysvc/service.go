package inventorysvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// Config configures a Service.
type Config struct {
	// Store is the opened inventory; required. The caller closes it after
	// Run has returned.
	Store inventory.Store
	// Spec is the --store value Store was opened from (see OpenStore). It
	// names the backend in logs, and a postgres:// one sets Refresh's
	// default.
	Spec string
	// File is the config file: its profiles and machines are applied to
	// the store at New, and its default_profile, discovery_profile and
	// discovery say what machines nobody enrolled boot. Required.
	File *config.Config
	// Discover records machines DHCP sees that the inventory does not know,
	// as state discovered. They boot default_profile if it is set.
	Discover bool
	// Refresh reloads the fleet view from the store this often, to pick up
	// writes by other servers sharing a PostgreSQL store. Default 5s for
	// PostgreSQL, off for SQLite (all writes go through this process).
	Refresh time.Duration
	// Reloaded, if set, is called with the view's new input after every
	// reload of the view, the first at New. It must not block.
	Reloaded func(machineview.Input)
	Logger   *slog.Logger // default: discard
}

// Service ties the store to the running server. Create it with New, run
// Run in the server's errgroup.
type Service struct {
	cfg   Config
	store inventory.Store
	view  *machineview.View
	log   *slog.Logger
	// policy holds what the config file says about machines nobody
	// enrolled; a reload fills in profiles and machines from the store.
	policy machineview.Input

	seen chan sighting // DHCP sightings for the worker in Run
	mu   sync.Mutex    // serializes view reloads
}

// sightingQueue bounds the work DHCP can queue; when full, sightings are
// dropped (the machine will send DHCP again) rather than block DHCP.
const sightingQueue = 1024

// sharedRefresh is Config.Refresh's default for a PostgreSQL store.
const sharedRefresh = 5 * time.Second

// New applies the config file's profiles and machines to the store and
// loads the fleet view from it.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.File == nil {
		return nil, errors.New("inventorysvc: Config.Store and Config.File are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Refresh == 0 && backend(cfg.Spec) == "postgres" {
		cfg.Refresh = sharedRefresh
	}
	s := &Service{cfg: cfg, store: cfg.Store, log: cfg.Logger, seen: make(chan sighting, sightingQueue),
		policy: policyFromConfig(cfg.File)}
	a, err := ApplyConfig(ctx, s.store, cfg.File)
	if err != nil {
		return nil, fmt.Errorf("apply config to the inventory: %w", err)
	}
	s.log.Info("inventory ready", "store", backend(cfg.Spec), "config_profiles", a.Profiles,
		"config_machines", a.Machines, "removed", a.Removed, "released", a.Released)
	if a.Released > 0 {
		s.log.Warn("profiles dropped from the config are still used by machines added through the API; they are kept and now managed through the API", "count", a.Released)
	}
	in, err := s.input(ctx)
	if err != nil {
		return nil, err
	}
	if s.view, err = machineview.New(in); err != nil {
		return nil, err
	}
	if cfg.Reloaded != nil {
		cfg.Reloaded(in)
	}
	return s, nil
}

// View is the fleet view the service keeps in step with the store; DHCP
// and the HTTP boot server look machines up in it.
func (s *Service) View() *machineview.View { return s.view }

// Run does the service's background work until ctx ends: recording DHCP
// sightings and, for shared stores, reloading the view.
func (s *Service) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if s.cfg.Refresh > 0 {
		t := time.NewTicker(s.cfg.Refresh)
		defer t.Stop()
		tick = t.C
	}
	return s.work(ctx, tick)
}
