package inventory

import (
	"context"
	"time"
)

// ScheduleRuns lets exactly one server of a fleet run each firing of a
// power schedule: every server's scheduler fires, and the one whose
// claim the store takes first runs it.
type ScheduleRuns interface {
	// ClaimScheduleRun records that server runs schedule name's firing
	// due at at. It reports false when another server claimed it first.
	ClaimScheduleRun(ctx context.Context, name string, at time.Time, server string) (bool, error)
}

// PowerSchedule is a power schedule added through the API: at the times
// the cron expression At names, Action on the machines named (a
// profile's, some, or all), in waves. The scheduler checks At, Action
// and Wave; the store checks the name and that the machines are named
// one way.
type PowerSchedule struct {
	Name     string
	At       string
	Action   string
	Profile  string
	Machines []string
	All      bool
	Wave     string
}

// PowerSchedules is the API's half of the power schedules; the config
// file's are not stored.
type PowerSchedules interface {
	// ListSchedules returns every stored schedule by name.
	ListSchedules(ctx context.Context) ([]PowerSchedule, error)
	// PutSchedule adds s, or replaces the schedule of that name.
	PutSchedule(ctx context.Context, s PowerSchedule) error
	// DeleteSchedule removes the schedule; ErrNotFound when there is none.
	DeleteSchedule(ctx context.Context, name string) error
}

// Validate checks what the store can: the name, and that the machines
// are named in exactly one way.
func (s *PowerSchedule) Validate() error {
	if !pnameRE.MatchString(s.Name) {
		return invalid("name", "want a schedule name (letters, digits, . _ -, at most 63), got %q", s.Name)
	}
	if s.At == "" || len(s.At) > 200 {
		return invalid("at", "want a cron expression like \"30 7 * * 1-5\", got %q", s.At)
	}
	n := 0
	for _, given := range []bool{len(s.Machines) > 0, s.Profile != "", s.All} {
		if given {
			n++
		}
	}
	if n != 1 {
		return invalid("machines", "name the machines with exactly one of profile, machines or all")
	}
	if len(s.Machines) > 10000 {
		return invalid("machines", "at most 10000 machines, got %d", len(s.Machines))
	}
	return nil
}
