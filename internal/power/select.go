package power

import (
	"context"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Selection names the machines of a command: some by name or MAC, those
// of a profile, or all; exactly one of the three.
type Selection struct {
	Machines []string
	Profile  string
	All      bool
}

// Inventory is what Select reads (an inventory.Store).
type Inventory interface {
	ListMachines(ctx context.Context, f inventory.MachineFilter) ([]inventory.Machine, error)
	ListPower(ctx context.Context) ([]inventory.PowerSettings, error)
}

// Check says whether sel names machines in exactly one way.
func (sel Selection) Check() error {
	n := 0
	for _, given := range []bool{len(sel.Machines) > 0, sel.Profile != "", sel.All} {
		if given {
			n++
		}
	}
	if n != 1 {
		return inventory.Invalid("machines", "name machines, or a profile, or all; exactly one of the three")
	}
	return nil
}

// String describes sel for logs and the audit trail.
func (sel Selection) String() string {
	switch {
	case sel.All:
		return "all"
	case sel.Profile != "":
		return "profile " + sel.Profile
	}
	return fmt.Sprint(sel.Machines)
}

// Select resolves sel to machines and how to power each: its stored
// settings, or Wake-on-LAN when it has none. A name or MAC that matches
// no machine is an ErrNotFound naming it; so is a profile nobody uses.
func Select(ctx context.Context, inv Inventory, sel Selection) ([]Target, error) {
	if err := sel.Check(); err != nil {
		return nil, err
	}
	all, err := inv.ListMachines(ctx, inventory.MachineFilter{Profile: sel.Profile})
	if err != nil {
		return nil, err
	}
	ms := all
	if len(sel.Machines) > 0 {
		ms = nil
		for _, key := range sel.Machines {
			m, ok := findMachine(all, key)
			if !ok {
				return nil, inventory.NotFound("machines", "no machine with MAC or name %q; see bootfleet machine list", key)
			}
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		if sel.Profile != "" {
			return nil, inventory.NotFound("profile", "no machine uses profile %q", sel.Profile)
		}
		return nil, inventory.NotFound("machines", "the inventory has no machines")
	}
	ps, err := inv.ListPower(ctx)
	if err != nil {
		return nil, err
	}
	byMAC := map[string]inventory.PowerSettings{}
	for _, p := range ps {
		byMAC[p.MAC.String()] = p
	}
	ts := make([]Target, 0, len(ms))
	for _, m := range ms {
		p, ok := byMAC[m.MAC.String()]
		if !ok {
			p = inventory.PowerSettings{MAC: m.MAC, Driver: inventory.DriverWOL}
		}
		ts = append(ts, Target{Machine: m, Settings: p})
	}
	return ts, nil
}

func findMachine(ms []inventory.Machine, key string) (inventory.Machine, bool) {
	hw, _ := inventory.ParseMAC(key)
	for _, m := range ms {
		if m.Name == key || (hw != nil && m.MAC.String() == hw.String()) {
			return m, true
		}
	}
	return inventory.Machine{}, false
}
