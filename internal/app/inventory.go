package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/fleet"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/postgres"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// InventoryOptions are the serve settings of the inventory.
type InventoryOptions struct {
	// Store is where the inventory lives: "" for SQLite in the data
	// directory (inventory.db), a postgres:// DSN, or a SQLite file path.
	Store string
	// OpenReads lets API GETs through without the token.
	OpenReads bool
	// Discover records machines DHCP sees that the inventory does not know,
	// as state discovered. They boot default_profile if it is set.
	Discover bool
	// Refresh reloads the fleet view from the store this often, to pick up
	// writes by other servers sharing a PostgreSQL store. Default 5s for
	// PostgreSQL, off for SQLite (all writes go through this process).
	Refresh time.Duration
	// Images and Disks back the API's image imports and machine resets;
	// nil refuses them.
	Images api.ImageFiles
	Disks  api.DiskResetter
	// Reloaded, if set, is called with the store and the new fleet config
	// after every reload of the view. It must not block.
	Reloaded func(inventory.Images, *config.Config)
}

// Inventory ties the store to the running server: it keeps fleet.View in
// step with the store, serves the API, backs DHCP leases and records
// discovered machines. Nothing here runs in the DHCP hot path except a
// non-blocking channel send.
type Inventory struct {
	store inventory.Store
	view  *fleet.View
	base  *config.Config
	api   http.Handler
	log   *slog.Logger
	opts  InventoryOptions

	seen chan sighting // DHCP sightings for the background worker
	mu   sync.Mutex    // serializes view rebuilds
}

type sighting struct {
	mac net.HardwareAddr
	at  time.Time
}

// sightingQueue bounds the work DHCP can queue; when full, sightings are
// dropped (the machine will send DHCP again) rather than block DHCP.
const sightingQueue = 1024

// OpenInventory opens the store, applies the config's profiles and
// machines, loads view from the store and builds the API. Call Run in the
// server's errgroup and Close when done.
func OpenInventory(ctx context.Context, c *config.Config, view *fleet.View, opts InventoryOptions, log *slog.Logger) (*Inventory, error) {
	st, err := openStore(ctx, c, opts.Store)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{store: st, view: view, base: c, log: log, opts: opts, seen: make(chan sighting, sightingQueue)}
	fail := func(err error) (*Inventory, error) { st.Close(); return nil, err }
	a, err := inventory.ApplyConfig(ctx, st, c)
	if err != nil {
		return fail(fmt.Errorf("apply config to the inventory: %w", err))
	}
	log.Info("inventory ready", "store", storeName(opts.Store), "config_profiles", a.Profiles,
		"config_machines", a.Machines, "removed", a.Removed, "released", a.Released)
	if a.Released > 0 {
		log.Warn("profiles dropped from the config are still used by machines added through the API; they are kept and now managed through the API", "count", a.Released)
	}
	if err := inv.Refresh(ctx); err != nil {
		return fail(err)
	}
	tok, err := api.LoadOrCreateToken(c.Data)
	if err != nil {
		return fail(err)
	}
	inv.api, err = api.New(api.Config{Store: st, Token: tok, OpenReads: opts.OpenReads, Logger: log,
		Images: opts.Images, Disks: opts.Disks,
		OnChange: func() {
			if err := inv.Refresh(context.Background()); err != nil {
				log.Error("refresh fleet view after an API write", "err", err)
			}
		}})
	if err != nil {
		return fail(err)
	}
	return inv, nil
}

func openStore(ctx context.Context, c *config.Config, spec string) (inventory.Store, error) {
	switch {
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return postgres.Open(ctx, spec)
	case spec == "":
		return sqlite.Open(ctx, filepath.Join(c.Data, sqlite.FileName))
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("--store %q: want empty (SQLite in the data directory), a SQLite file path or postgres://user:pass@host/db", spec)
	}
	return sqlite.Open(ctx, spec)
}

func storeName(spec string) string {
	if strings.Contains(spec, "://") {
		return "postgres"
	}
	return "sqlite"
}

// Close closes the store.
func (inv *Inventory) Close() error { return inv.store.Close() }

// Store is the opened store, for callers that record more (boot events).
func (inv *Inventory) Store() inventory.Store { return inv.store }

// Refresh rebuilds the fleet view from the store. Lookups keep using the
// old snapshot until the new one is swapped in.
func (inv *Inventory) Refresh(ctx context.Context) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	fc, err := inventory.FleetConfig(ctx, inv.store, inv.base)
	if err != nil {
		return fmt.Errorf("load fleet view from the inventory: %w", err)
	}
	if err := inv.view.Apply(fc); err != nil {
		return err
	}
	if inv.opts.Reloaded != nil {
		inv.opts.Reloaded(inv.store, fc)
	}
	return nil
}

// Handler serves the API under /api/v1/ and everything else with next.
func (inv *Inventory) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.Prefix || strings.HasPrefix(r.URL.Path, api.Prefix+"/") {
			inv.api.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Leases returns a dhcp.LeaseStore backed by the inventory: Put commits
// (and, for SQLite, fsyncs) before it returns, so no ACK goes out for a
// lease that is not durable.
func (inv *Inventory) Leases() dhcp.LeaseStore { return leaseAdapter{inv.store} }

type leaseAdapter struct{ s inventory.Leases }

func (a leaseAdapter) Load(ctx context.Context) ([]dhcp.Lease, error) {
	ls, err := a.s.ListLeases(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dhcp.Lease, len(ls))
	for i, l := range ls {
		out[i] = dhcp.Lease{MAC: l.MAC, IP: l.IP, Expiry: l.Expiry}
	}
	return out, nil
}

func (a leaseAdapter) Put(ctx context.Context, l dhcp.Lease) error {
	return a.s.PutLease(ctx, inventory.Lease{MAC: l.MAC, IP: l.IP, Expiry: l.Expiry})
}

// PutBatch implements dhcp.BatchStore: one transaction for all, when the
// store can (SQLite and PostgreSQL both can), so concurrent REQUESTs share
// one commit.
func (a leaseAdapter) PutBatch(ctx context.Context, ls []dhcp.Lease) []error {
	errs := make([]error, len(ls))
	b, ok := a.s.(inventory.LeaseBatcher)
	if !ok {
		for i, l := range ls {
			errs[i] = a.Put(ctx, l)
		}
		return errs
	}
	in := make([]inventory.Lease, len(ls))
	for i, l := range ls {
		in[i] = inventory.Lease{MAC: l.MAC, IP: l.IP, Expiry: l.Expiry}
	}
	each, err := b.PutLeases(ctx, in)
	for i := range errs {
		if err != nil {
			errs[i] = err
		} else {
			errs[i] = each[i]
		}
	}
	return errs
}

func (a leaseAdapter) Delete(ctx context.Context, mac net.HardwareAddr) error {
	return a.s.DeleteLease(ctx, mac)
}

// Observer wraps next (may be nil) so every DHCPDISCOVER also reaches the
// inventory worker: unknown machines are recorded as discovered, known ones
// as booting. It never blocks.
func (inv *Inventory) Observer(next dhcp.Observer) dhcp.Observer {
	return observer{inv: inv, next: next}
}

type observer struct {
	inv  *Inventory
	next dhcp.Observer
}

func (o observer) DHCPPacket(mac net.HardwareAddr, t dhcpv4.MessageType, c pxe.Client) {
	if o.next != nil {
		o.next.DHCPPacket(mac, t, c)
	}
	if t != dhcpv4.MessageTypeDiscover {
		return
	}
	select {
	case o.inv.seen <- sighting{mac: append(net.HardwareAddr(nil), mac...), at: time.Now()}:
	default:
	}
}

// Run does the inventory's background work until ctx ends: recording DHCP
// sightings and, for shared stores, reloading the view.
func (inv *Inventory) Run(ctx context.Context) error {
	every := inv.opts.Refresh
	if every == 0 && storeName(inv.opts.Store) == "postgres" {
		every = 5 * time.Second
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	d := discoveries{view: inv.view, pending: map[string]net.HardwareAddr{}}
	b := backlog{queued: map[string]bool{}}
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-inv.seen:
			if d.pending[s.mac.String()] == nil { // else recorded, not yet in the view
				b.push(s)
			}
		case <-b.ready(time.Now()):
			if s := b.pop(time.Now()); inv.record(ctx, s) {
				d.add(s.mac, time.Now())
			}
		case <-d.timer:
			d.flush(time.Now())
		case <-tick:
			if err := inv.Refresh(ctx); err != nil && ctx.Err() == nil {
				inv.log.Warn("reload fleet view", "err", err)
			}
		}
	}
}

// record notes one DHCPDISCOVER and reports whether it created a
// discovered machine, which the caller adds to the view. Store errors are
// logged, never fatal: the boot itself goes on from the in-memory view.
func (inv *Inventory) record(ctx context.Context, s sighting) bool {
	if m, known := inv.view.Machine(s.mac); known {
		st := inventory.StateBooting
		if !m.Enrolled {
			st = inventory.StateDiscovered // stays listed as discovered until an admin enrolls it
		}
		err := inv.store.SetStatus(ctx, s.mac, st, s.at, nil)
		if err != nil && !errors.Is(err, inventory.ErrNotFound) {
			inv.log.Warn("record boot start", "mac", s.mac.String(), "err", err)
		}
		return false
	}
	if !inv.opts.Discover {
		return false
	}
	_, err := inv.store.CreateMachine(ctx, inventory.Machine{MAC: s.mac, State: inventory.StateDiscovered, LastBoot: s.at})
	if errors.Is(err, inventory.ErrConflict) {
		return false // another server of the fleet got there first; its Refresh brings it
	}
	if err != nil {
		inv.log.Warn("record discovered machine", "mac", s.mac.String(), "err", err)
		return false
	}
	inv.log.Info("discovered machine", "mac", s.mac.String(), "hint", "enroll it with: bootfleet machine set "+s.mac.String()+" --profile NAME")
	inv.store.AddEvent(ctx, inventory.Event{Time: s.at, MAC: s.mac, Kind: "discovered"})
	return true
}

// BootClock wraps clock so a completed boot also marks the machine booted
// in the inventory, off the request path.
func (inv *Inventory) BootClock(clock httpboot.BootClock) httpboot.BootClock {
	return bootClock{inv: inv, next: clock}
}

type bootClock struct {
	inv  *Inventory
	next httpboot.BootClock
}

func (b bootClock) Complete(mac net.HardwareAddr) (time.Duration, bool) {
	took, ok := b.next.Complete(mac)
	mac = append(net.HardwareAddr(nil), mac...)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		now := time.Now()
		st := inventory.StateBooted
		if m, ok := b.inv.view.Machine(mac); ok && !m.Enrolled {
			st = inventory.StateDiscovered
		}
		// A zero time keeps last_boot, which is when this boot started.
		err := b.inv.store.SetStatus(ctx, mac, st, time.Time{}, nil)
		if err != nil && !errors.Is(err, inventory.ErrNotFound) {
			b.inv.log.Warn("record boot complete", "mac", mac.String(), "err", err)
		}
		details := "unknown duration"
		if ok {
			details = fmt.Sprintf("%.2fs since first DHCP packet", took.Seconds())
		}
		b.inv.store.AddEvent(ctx, inventory.Event{Time: now, MAC: mac, Kind: "boot-complete", Details: details})
	}()
	return took, ok
}
