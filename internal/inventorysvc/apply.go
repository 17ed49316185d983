package inventorysvc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Applied counts what ApplyConfig changed, for the start-up log line.
type Applied struct {
	Profiles, Machines int // written from the config
	Removed            int // config records no longer in the config, deleted
	Released           int // profiles dropped from the config but still used, now owned by the API
}

// ApplyConfig makes s hold what c declares: the config stays the source for
// the profiles and machines it names, so they are overwritten (Source
// config) at every start, and config records the file no longer names are
// removed. Records added through the API are left alone, as are the boot
// status and labels of config machines.
func ApplyConfig(ctx context.Context, s inventory.Store, c *config.Config) (Applied, error) {
	var a Applied
	if err := CheckConfigPins(ctx, s, c); err != nil {
		return a, err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		p, err := profileFromConfig(name, c.Profiles[name])
		if err != nil {
			return a, err
		}
		if err := upsertProfile(ctx, s, p); err != nil {
			return a, fmt.Errorf("profiles.%s: %w", name, err)
		}
		a.Profiles++
	}
	want := map[string]bool{}
	for _, m := range c.Machines {
		if hw, err := net.ParseMAC(m.MAC); err == nil {
			want[hw.String()] = true
		}
	}
	// Stale config machines go before the upserts, so a name or address can
	// move from a removed machine to a new one.
	old, err := s.ListMachines(ctx, inventory.MachineFilter{})
	if err != nil {
		return a, err
	}
	for _, m := range old {
		if m.Source == inventory.SourceConfig && !want[m.MAC.String()] {
			if err := s.DeleteMachine(ctx, m.MAC); err != nil && !errors.Is(err, inventory.ErrNotFound) {
				return a, err
			}
			a.Removed++
		}
	}
	for i, cm := range c.Machines {
		m, err := machineFromConfig(cm)
		if err == nil {
			err = upsertMachine(ctx, s, m)
		}
		if err != nil {
			return a, fmt.Errorf("machines[%d]: %w", i, err)
		}
		a.Machines++
	}
	if err := applyPower(ctx, s, c); err != nil {
		return a, err
	}
	profiles, err := s.ListProfiles(ctx)
	if err != nil {
		return a, err
	}
	for _, p := range profiles {
		if _, ok := c.Profiles[p.Name]; ok || p.Source != inventory.SourceConfig {
			continue
		}
		err := s.DeleteProfile(ctx, p.Name)
		switch {
		case err == nil:
			a.Removed++
		case errors.Is(err, inventory.ErrConflict):
			// Machines added through the API still boot it: keep it, now
			// owned by the API, rather than break them.
			p.Source = inventory.SourceAPI
			if _, err := s.UpdateProfile(ctx, p); err != nil {
				return a, err
			}
			a.Released++
		case !errors.Is(err, inventory.ErrNotFound):
			return a, err
		}
	}
	return a, nil
}

func upsertProfile(ctx context.Context, s inventory.Store, p inventory.Profile) error {
	_, err := s.UpdateProfile(ctx, p)
	if errors.Is(err, inventory.ErrNotFound) {
		_, err = s.CreateProfile(ctx, p)
	}
	return err
}

// upsertMachine writes the config's fields of cm over the stored machine,
// keeping what the config does not say (labels, boot status).
func upsertMachine(ctx context.Context, s inventory.Store, cm inventory.Machine) error {
	m, err := s.GetMachine(ctx, cm.MAC)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		m = inventory.Machine{MAC: cm.MAC, State: inventory.StateReady}
	case err != nil:
		return err
	case m.State == inventory.StateDiscovered:
		m.State = inventory.StateReady // naming it in the config enrolls it
	}
	m.Name, m.Profile, m.IP, m.Channel, m.Source = cm.Name, cm.Profile, cm.IP, cm.Channel, cm.Source
	if err == nil {
		_, err = s.UpdateMachine(ctx, m)
	} else {
		_, err = s.CreateMachine(ctx, m)
	}
	if errors.Is(err, inventory.ErrConflict) {
		return fmt.Errorf("%w; the other machine was added through the API: remove it (bootfleet machine rm) or change this entry", err)
	}
	return err
}

// applyPower writes the power settings of config machines and removes
// config settings the file no longer has. Settings set through the API
// for a machine whose entry has no power: stay.
func applyPower(ctx context.Context, s inventory.Store, c *config.Config) error {
	want := map[string]bool{}
	for i, cm := range c.Machines {
		if cm.Power == nil {
			continue
		}
		key := fmt.Sprintf("machines[%d].power", i)
		hw, err := inventory.ParseMAC(cm.MAC)
		if err != nil {
			return fmt.Errorf("machines[%d]: %w", i, err)
		}
		p, err := powerFromConfig(key, hw, *cm.Power)
		if err != nil {
			return err
		}
		if err := s.PutPower(ctx, p); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		want[hw.String()] = true
	}
	old, err := s.ListPower(ctx)
	if err != nil {
		return err
	}
	for _, p := range old {
		if p.Source == inventory.SourceConfig && !want[p.MAC.String()] {
			if err := s.DeletePower(ctx, p.MAC); err != nil {
				return err
			}
		}
	}
	return nil
}
