package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func (s *server) listMachines(w http.ResponseWriter, r *http.Request) error {
	f, err := machineFilter(r.URL.Query())
	if err != nil {
		return err
	}
	ms, err := s.cfg.Store.ListMachines(r.Context(), f)
	if err != nil {
		return err
	}
	out := MachineList{Machines: make([]Machine, 0, len(ms))}
	for _, m := range ms {
		out.Machines = append(out.Machines, machineOut(m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// machineFilter reads ?state=S&profile=P&label=k=v (label repeatable).
func machineFilter(q url.Values) (inventory.MachineFilter, error) {
	var f inventory.MachineFilter
	for k := range q {
		switch k {
		case "state", "profile", "label":
		default:
			return f, inventory.Invalid(k, "unknown query parameter; want state, profile or label")
		}
	}
	if st := q.Get("state"); st != "" {
		var err error
		if f.State, err = inventory.ParseState(st); err != nil {
			return f, err
		}
	}
	f.Profile = q.Get("profile")
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return f, inventory.Invalid("label", "want key=value, got %q", l)
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = v
	}
	return f, nil
}

// machineIn converts a POST or PUT body; read-only fields are ignored.
func machineIn(m Machine) (inventory.Machine, error) {
	hw, err := inventory.ParseMAC(m.MAC)
	if err != nil {
		return inventory.Machine{}, err
	}
	ip, err := parseIPField("ip", m.IP)
	if err != nil {
		return inventory.Machine{}, err
	}
	files, err := filesIn(m.Files)
	if err != nil {
		return inventory.Machine{}, err
	}
	return inventory.Machine{MAC: hw, Name: m.Name, Profile: m.Profile, Labels: m.Labels, IP: ip, RootFiles: files, Vars: m.Vars, Channel: m.RootChannel}, nil
}

func (s *server) createMachine(w http.ResponseWriter, r *http.Request) error {
	var in Machine
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.MAC == "" {
		return inventory.Invalid("mac", "required: the machine's Ethernet MAC, e.g. 52:54:00:12:34:56")
	}
	m, err := machineIn(in)
	if err != nil {
		return err
	}
	m.State = inventory.StateReady
	if err := s.checkMachine(r, &m); err != nil {
		return err
	}
	m, err = s.cfg.Store.CreateMachine(r.Context(), m)
	if err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.added", describe(m))
	w.Header().Set("Location", Prefix+"/machines/"+m.MAC.String())
	writeJSON(w, http.StatusCreated, machineOut(m))
	return nil
}

// lookup finds the machine named in the path, by MAC or by name, so people
// can write `bootfleet machine show pc1`.
func (s *server) lookup(r *http.Request) (inventory.Machine, error) {
	return s.lookupKey(r, r.PathValue("mac"))
}

// lookupKey finds the machine key names, by MAC or by name.
func (s *server) lookupKey(r *http.Request, key string) (inventory.Machine, error) {
	if hw, err := inventory.ParseMAC(key); err == nil {
		return s.cfg.Store.GetMachine(r.Context(), hw)
	}
	probe := inventory.Machine{MAC: make([]byte, 6), Name: key}
	if err := probe.Validate(); err != nil {
		return inventory.Machine{}, inventory.Invalid("mac", "want a MAC like 52:54:00:12:34:56 or a machine name, got %q", key)
	}
	ms, err := s.cfg.Store.ListMachines(r.Context(), inventory.MachineFilter{})
	if err != nil {
		return inventory.Machine{}, err
	}
	for _, m := range ms {
		if m.Name == key {
			return m, nil
		}
	}
	return inventory.Machine{}, inventory.NotFound("mac", "no machine with MAC or name %q", key)
}

func (s *server) getMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, machineOut(m))
	return nil
}

func (s *server) putMachine(w http.ResponseWriter, r *http.Request) error {
	old, err := s.lookup(r)
	if err != nil {
		return err
	}
	var in Machine
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.MAC == "" {
		in.MAC = old.MAC.String()
	}
	m, err := machineIn(in)
	if err != nil {
		return err
	}
	if m.MAC.String() != old.MAC.String() {
		return inventory.Invalid("mac", "body MAC %s differs from %s in the path; a machine's MAC cannot change (remove it and add it again)", m.MAC, old.MAC)
	}
	if err := readOnly(old.Source, "mac", "machine "+old.String()); err != nil {
		return err
	}
	m.State, m.Source, m.LastBoot, m.LastAddress = enrolled(old, m.Profile), old.Source, old.LastBoot, old.LastAddress
	return s.updateMachine(w, r, m)
}

// enrolled is the state after an admin edit: giving a discovered machine a
// profile enrolls it.
func enrolled(old inventory.Machine, profile string) inventory.State {
	if old.State == inventory.StateDiscovered && profile != "" {
		return inventory.StateReady
	}
	return old.State
}

func (s *server) patchMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	var p MachinePatch
	if err := decode(r, &p); err != nil {
		return err
	}
	// operate may only move a machine to another profile; renaming,
	// readdressing or relabelling it changes the fleet's records.
	if p.Name != nil || p.IP != nil || p.State != nil || len(p.Labels) > 0 || p.Files != nil || p.Vars != nil {
		if err := require(r, admin, "PATCH /machines/{mac} of name, ip, state, labels, files or vars"); err != nil {
			return err
		}
	}
	if err := readOnly(m.Source, "mac", "machine "+m.String()); err != nil {
		return err
	}
	state := m.State
	if p.Name != nil {
		m.Name = *p.Name
	}
	if p.Profile != nil {
		m.Profile = *p.Profile
		state = enrolled(m, m.Profile)
	}
	if p.RootChannel != nil {
		m.Channel = *p.RootChannel
	}
	if p.IP != nil {
		if m.IP, err = parseIPField("ip", *p.IP); err != nil {
			return err
		}
	}
	if p.State != nil {
		if state, err = inventory.ParseState(*p.State); err != nil {
			return err
		}
	}
	m.State = state
	if len(p.Labels) > 0 {
		labels := maps.Clone(m.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range p.Labels {
			if v == nil {
				delete(labels, k)
			} else {
				labels[k] = *v
			}
		}
		m.Labels = labels
	}
	if p.Files != nil {
		if m.RootFiles, err = filesIn(*p.Files); err != nil {
			return err
		}
	}
	if p.Vars != nil {
		m.Vars = *p.Vars
	}
	return s.updateMachine(w, r, m)
}

// checkMachine validates m and its files:' templates against its vars
// and its profile's.
func (s *server) checkMachine(r *http.Request, m *inventory.Machine) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := s.checkMachinePin(r, *m); err != nil {
		return err
	}
	return s.checkFiles(r, func(ids IdentityService) error { return ids.CheckMachine(r.Context(), *m) }, len(m.RootFiles)+len(m.Vars))
}

// checkMachinePin refuses a root_channel that pins a version its
// profile's root image cannot boot, now rather than at the next boot.
func (s *server) checkMachinePin(r *http.Request, m inventory.Machine) error {
	if _, err := strconv.Atoi(m.Channel); err != nil {
		return nil
	}
	p, err := s.cfg.Store.GetProfile(r.Context(), m.Profile)
	if errors.Is(err, inventory.ErrNotFound) {
		return nil // the store refuses the unknown profile, naming it
	}
	if err != nil {
		return err
	}
	if p.Root.Image == "" {
		return inventory.Invalid("root_channel", "profile %s has no root image, so there is no version %s to pin; give the profile a root image or leave root_channel empty", p.Name, m.Channel)
	}
	return inventory.CheckPinIn(r.Context(), s.cfg.Store, p.Root.Image, m.Channel)
}

func (s *server) updateMachine(w http.ResponseWriter, r *http.Request, m inventory.Machine) error {
	if err := s.checkMachine(r, &m); err != nil {
		return err
	}
	m, err := s.cfg.Store.UpdateMachine(r.Context(), m)
	if err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.updated", describe(m))
	writeJSON(w, http.StatusOK, machineOut(m))
	return nil
}

func (s *server) deleteMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	if err := readOnly(m.Source, "mac", "machine "+m.String()); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteMachine(r.Context(), m.MAC); err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.removed", m.String())
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func describe(m inventory.Machine) string {
	d := fmt.Sprintf("name=%q profile=%q state=%s", m.Name, m.Profile, m.State)
	if m.IP != nil {
		d += " ip=" + m.IP.String()
	}
	if m.Channel != "" {
		d += " root_channel=" + m.Channel
	}
	return d
}

// changed tells the caller to refresh its view and records an event for
// machine writes (mac non-empty). A failed event write is logged only: the
// change itself succeeded.
func (s *server) changed(r *http.Request, mac, kind, details string) {
	s.cfg.OnChange()
	if mac == "" {
		return
	}
	hw, _ := inventory.ParseMAC(mac)
	err := s.cfg.Store.AddEvent(r.Context(), inventory.Event{Time: s.cfg.Now(), MAC: hw, Kind: kind, Details: details})
	if err != nil && !errors.Is(err, r.Context().Err()) {
		s.log.Warn("record api event", "mac", mac, "kind", kind, "err", err)
	}
}
