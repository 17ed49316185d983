package inventorysvc

import (
	"context"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// Refresh reloads the fleet view from the store. Lookups keep using the
// old snapshot until the new one is swapped in.
func (s *Service) Refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.input(ctx)
	if err != nil {
		return err
	}
	if err := s.view.Apply(in); err != nil {
		return err
	}
	if s.cfg.Reloaded != nil {
		s.cfg.Reloaded(in)
	}
	return nil
}

// Changed reloads the view after a write to the store's machines or
// profiles, so the next DHCP packet or script sees it; it is the API's
// OnChange. A failure is logged: the write itself has succeeded.
func (s *Service) Changed() {
	if err := s.Refresh(context.Background()); err != nil {
		s.log.Error("refresh fleet view after an API write", "err", err)
	}
}

// input is the store's profiles and machines under the config file's
// policy for machines nobody enrolled.
func (s *Service) input(ctx context.Context) (machineview.Input, error) {
	ps, err := s.store.ListProfiles(ctx)
	if err != nil {
		return machineview.Input{}, fmt.Errorf("load fleet view from the inventory: %w", err)
	}
	ms, err := s.store.ListMachines(ctx, inventory.MachineFilter{})
	if err != nil {
		return machineview.Input{}, fmt.Errorf("load fleet view from the inventory: %w", err)
	}
	in := s.policy
	in.Profiles = make(map[string]inventory.Profile, len(ps))
	for _, p := range ps {
		in.Profiles[p.Name] = p
	}
	in.Machines = make([]machineview.Machine, 0, len(ms))
	for _, m := range ms {
		// A machine nobody named or gave a profile was only discovered.
		in.Machines = append(in.Machines, machineview.Machine{MAC: m.MAC, Name: m.Name, Profile: m.Profile, IP: m.IP,
			Channel: m.Channel, Enrolled: m.Name != "" || m.Profile != ""})
	}
	return in, nil
}
