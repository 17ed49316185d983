package identitysvc

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// A profile or machine gets its files: and vars: from the config when the
// config holds it, else from the inventory, where the API puts them. The
// API cannot change a config record, so one record never has both.

func storedSet(key string, files []inventory.RootFile, vars map[string]string) Set {
	set := Set{Key: key, Vars: vars}
	for _, f := range files {
		set.Files = append(set.Files, FileSpec{Path: f.Path, Mode: f.Mode, Owner: f.Owner, Template: f.Template})
	}
	return set
}

// profileSet is the files: and vars: of profile name.
func (s *Service) profileSet(ctx context.Context, name string) (Set, error) {
	if t := s.cfg.Files; t != nil {
		if set, ok := t.profileSets[name]; ok {
			return set, nil
		}
	}
	if name == "" {
		return Set{}, nil
	}
	p, err := s.cfg.Store.GetProfile(ctx, name)
	if errors.Is(err, inventory.ErrNotFound) {
		return Set{}, nil
	}
	if err != nil {
		return Set{}, err
	}
	return storedSet("profile "+name, p.RootFiles, p.Vars), nil
}

// machineSet is the files: and vars: of m.
func (s *Service) machineSet(m inventory.Machine) Set {
	if t := s.cfg.Files; t != nil {
		if ms, ok := t.machineSets[m.MAC.String()]; ok {
			return ms.Set
		}
	}
	return storedSet("machine "+m.String(), m.RootFiles, m.Vars)
}

// profileOf is the profile m boots: its own, else the default.
func (s *Service) profileOf(m inventory.Machine) string {
	if s.cfg.Profile != nil {
		return s.cfg.Profile(m.MAC)
	}
	return m.Profile
}

// templatesFor compiles the templates of m and its profile prof.
func (s *Service) templatesFor(ctx context.Context, m inventory.Machine, prof string) (*Templates, error) {
	pset, err := s.profileSet(ctx, prof)
	if err != nil {
		return nil, err
	}
	return NewTemplates(map[string]Set{prof: pset},
		map[string]MachineSet{m.MAC.String(): {Set: s.machineSet(m), Profile: prof}})
}

// files renders m's files; addr is its address when it has no reserved one.
func (s *Service) files(ctx context.Context, m inventory.Machine, addr net.IP) ([]identity.File, error) {
	ip := m.IP
	if ip == nil {
		ip = addr
	}
	prof := s.profileOf(m)
	t, err := s.templatesFor(ctx, m, prof)
	if err != nil {
		return nil, fmt.Errorf("files of %s: %w", m, err)
	}
	return t.Render(Machine{MAC: m.MAC, Name: m.Name, Profile: prof, IP: ip})
}

// CheckProfile checks the files: of p, about to be stored, as a boot would
// render them: owners, templates that parse and use only variables that
// exist. The own files of p's machines must still find the vars they use.
// The error is inventory.ErrInvalid on field files.
func (s *Service) CheckProfile(ctx context.Context, p inventory.Profile) error {
	pset := storedSet("profile "+p.Name, p.RootFiles, p.Vars)
	if _, err := compileSet(pset, pset.Vars); err != nil {
		return inventory.Invalid("files", "%v", err)
	}
	ms, err := s.cfg.Store.ListMachines(ctx, inventory.MachineFilter{Profile: p.Name})
	if err != nil {
		return err
	}
	for _, m := range ms {
		mset := s.machineSet(m)
		if _, err := compileSet(mset, merge(p.Vars, mset.Vars)); err != nil {
			return inventory.Invalid("vars", "%v; set the var on the machine, or keep it on the profile", err)
		}
	}
	return nil
}

// CheckMachine checks the files: of m, about to be stored, against its
// own vars and its profile's. The error is inventory.ErrInvalid on field
// files.
func (s *Service) CheckMachine(ctx context.Context, m inventory.Machine) error {
	prof := m.Profile
	if prof == "" {
		prof = s.profileOf(m)
	}
	pset, err := s.profileSet(ctx, prof)
	if err != nil {
		return err
	}
	mset := storedSet("machine "+m.String(), m.RootFiles, m.Vars)
	if _, err := compileSet(mset, merge(pset.Vars, mset.Vars)); err != nil {
		return inventory.Invalid("files", "%v", err)
	}
	return nil
}
