package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/bootfleet/bootfleet/internal/config"
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
func ApplyConfig(ctx context.Context, s Store, c *config.Config) (Applied, error) {
	var a Applied
	for _, name := range sortedKeys(c.Profiles) {
		cp := c.Profiles[name]
		p := Profile{Name: name, Kernel: cp.Kernel, Initrd: cp.Initrd, Cmdline: cp.Cmdline,
			Root: Root{Image: cp.Root.Image, Overlay: cp.Root.Overlay, Kernel: cp.Root.Kernel}, Loader: cp.Loader, Source: SourceConfig}
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
	old, err := s.ListMachines(ctx, MachineFilter{})
	if err != nil {
		return a, err
	}
	for _, m := range old {
		if m.Source == SourceConfig && !want[m.MAC.String()] {
			if err := s.DeleteMachine(ctx, m.MAC); err != nil && !errors.Is(err, ErrNotFound) {
				return a, err
			}
			a.Removed++
		}
	}
	for i, cm := range c.Machines {
		if err := upsertMachine(ctx, s, cm); err != nil {
			return a, fmt.Errorf("machines[%d]: %w", i, err)
		}
		a.Machines++
	}
	profiles, err := s.ListProfiles(ctx)
	if err != nil {
		return a, err
	}
	for _, p := range profiles {
		if _, ok := c.Profiles[p.Name]; ok || p.Source != SourceConfig {
			continue
		}
		err := s.DeleteProfile(ctx, p.Name)
		switch {
		case err == nil:
			a.Removed++
		case errors.Is(err, ErrConflict):
			// Machines added through the API still boot it: keep it, now
			// owned by the API, rather than break them.
			p.Source = SourceAPI
			if _, err := s.UpdateProfile(ctx, p); err != nil {
				return a, err
			}
			a.Released++
		case !errors.Is(err, ErrNotFound):
			return a, err
		}
	}
	return a, nil
}

func upsertProfile(ctx context.Context, s Store, p Profile) error {
	_, err := s.UpdateProfile(ctx, p)
	if errors.Is(err, ErrNotFound) {
		_, err = s.CreateProfile(ctx, p)
	}
	return err
}

func upsertMachine(ctx context.Context, s Store, cm config.Machine) error {
	hw, err := ParseMAC(cm.MAC)
	if err != nil {
		return err
	}
	var ip net.IP
	if cm.IP != "" {
		if ip = net.ParseIP(cm.IP).To4(); ip == nil {
			return Invalid("ip", "want an IPv4 address, got %q", cm.IP)
		}
	}
	m, err := s.GetMachine(ctx, hw)
	switch {
	case errors.Is(err, ErrNotFound):
		m = Machine{MAC: hw, State: StateReady}
	case err != nil:
		return err
	case m.State == StateDiscovered:
		m.State = StateReady // naming it in the config enrolls it
	}
	m.Name, m.Profile, m.IP, m.Source = cm.Name, cm.Profile, ip, SourceConfig
	if err == nil {
		_, err = s.UpdateMachine(ctx, m)
	} else {
		_, err = s.CreateMachine(ctx, m)
	}
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w; the other machine was added through the API: remove it (bootfleet machine rm) or change this entry", err)
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
