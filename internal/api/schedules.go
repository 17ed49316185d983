package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power/schedule"
)

// ScheduleLister lists the power schedules (a *schedule.Scheduler), and
// hears when the API has changed the stored ones.
type ScheduleLister interface {
	Statuses() []schedule.Status
	Changed()
}

// Schedule is a power schedule on the wire, from the config file
// (source config) or added through the API (source api), with its next
// run and, when this server ran one, its last.
type Schedule struct {
	Name       string     `json:"name"`
	At         string     `json:"at"`
	Action     string     `json:"action"`
	Machines   string     `json:"machines"` // all, profile P, or [names]
	Wave       string     `json:"wave,omitempty"`
	Source     string     `json:"source"`
	Next       *time.Time `json:"next,omitempty"`
	LastRun    *time.Time `json:"last_run,omitempty"`
	LastResult string     `json:"last_result,omitempty"`
}

// ScheduleList is the answer of GET /schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	out := ScheduleList{Schedules: []Schedule{}}
	if s.cfg.Schedules != nil {
		for _, st := range s.cfg.Schedules.Statuses() {
			out.Schedules = append(out.Schedules, scheduleOut(st))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// ScheduleIn is the body of POST /schedules: a schedule to add, or to
// replace one added through the API before.
type ScheduleIn struct {
	Name     string   `json:"name"`
	At       string   `json:"at"`
	Action   string   `json:"action"`
	Profile  string   `json:"profile,omitempty"`
	Machines []string `json:"machines,omitempty"`
	All      bool     `json:"all,omitempty"`
	Wave     string   `json:"wave,omitempty"`
}

func (s *server) putSchedule(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Schedules == nil {
		return inventory.Invalid("", "this server runs no schedules")
	}
	var in ScheduleIn
	if err := decode(r, &in); err != nil {
		return err
	}
	p := inventory.PowerSchedule{Name: in.Name, At: in.At, Action: in.Action, Profile: in.Profile, Machines: in.Machines,
		All: in.All, Wave: in.Wave}
	if _, err := schedule.Parse(p); err != nil {
		return err
	}
	if err := s.configSchedule(p.Name); err != nil {
		return err
	}
	if err := s.cfg.Store.PutSchedule(r.Context(), p); err != nil {
		return err
	}
	s.cfg.Schedules.Changed()
	setNote(r, fmt.Sprintf("%s %s at %q", p.Action, p.Name, p.At))
	for _, st := range s.cfg.Schedules.Statuses() {
		if st.Name == p.Name {
			writeJSON(w, http.StatusOK, scheduleOut(st))
			return nil
		}
	}
	// The scheduler reads it on its next pass.
	writeJSON(w, http.StatusOK, Schedule{Name: p.Name, At: p.At, Action: p.Action, Wave: p.Wave, Source: string(inventory.SourceAPI)})
	return nil
}

func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Schedules == nil {
		return inventory.Invalid("", "this server runs no schedules")
	}
	name := r.PathValue("name")
	if err := s.configSchedule(name); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteSchedule(r.Context(), name); err != nil {
		return err
	}
	s.cfg.Schedules.Changed()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// configSchedule refuses a name the config file's schedules own.
func (s *server) configSchedule(name string) error {
	for _, st := range s.cfg.Schedules.Statuses() {
		if st.Name == name && st.Source == string(inventory.SourceConfig) {
			return readOnly(inventory.SourceConfig, "name", "schedule "+name)
		}
	}
	return nil
}

func scheduleOut(st schedule.Status) Schedule {
	return Schedule{Name: st.Name, At: st.At, Action: st.Action, Machines: st.Machines, Wave: st.Wave, Source: st.Source,
		Next: timeOrNil(st.Next), LastRun: timeOrNil(st.LastRun), LastResult: st.LastResult}
}
