package api

import (
	"net/http"
	"time"

	"github.com/bootfleet/bootfleet/internal/power/schedule"
)

// ScheduleLister lists the power schedules (a *schedule.Scheduler).
type ScheduleLister interface {
	Statuses() []schedule.Status
}

// Schedule is a power schedule on the wire. Schedules are written in the
// config file (schedules:); the API shows them with their next run and,
// when this server ran one, its last.
type Schedule struct {
	Name       string     `json:"name"`
	At         string     `json:"at"`
	Action     string     `json:"action"`
	Machines   string     `json:"machines"`
	Wave       string     `json:"wave,omitempty"`
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
			out.Schedules = append(out.Schedules, Schedule{Name: st.Name, At: st.At, Action: st.Action, Machines: st.Machines,
				Wave: st.Wave, Next: timeOrNil(st.Next), LastRun: timeOrNil(st.LastRun), LastResult: st.LastResult})
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
