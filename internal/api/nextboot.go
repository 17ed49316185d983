package api

import (
	"net/http"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// NextBoot is a machine's one-shot boot override on the wire: a profile,
// local (its own disk) or, on PUT, maintenance (the config's
// maintenance_profile). "" means none.
type NextBoot struct {
	Target string `json:"target"`
}

// Maintenance is the next-boot target that stands for the config's
// maintenance_profile.
const Maintenance = "maintenance"

func (s *server) getNextBoot(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	target, err := s.cfg.Store.GetNextBoot(r.Context(), m.MAC)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NextBoot{Target: target})
	return nil
}

func (s *server) putNextBoot(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	var in NextBoot
	if err := decode(r, &in); err != nil {
		return err
	}
	target := in.Target
	switch target {
	case "":
		return inventory.Invalid("target", "want a profile, local or maintenance; to remove the override, DELETE it")
	case Maintenance:
		if s.cfg.MaintenanceProfile == "" {
			return inventory.Invalid("target", "no maintenance_profile in the server's config; set one there, or name a profile")
		}
		target = s.cfg.MaintenanceProfile
	}
	if err := s.cfg.Store.SetNextBoot(r.Context(), m.MAC, target); err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.next-boot", target)
	writeJSON(w, http.StatusOK, NextBoot{Target: target})
	return nil
}

func (s *server) deleteNextBoot(w http.ResponseWriter, r *http.Request) error {
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.SetNextBoot(r.Context(), m.MAC, ""); err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.next-boot", "none")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
