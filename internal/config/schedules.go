package config

import (
	"fmt"
	"regexp"

	"github.com/robfig/cron/v3"

	"github.com/bootfleet/bootfleet/internal/power"
)

// Schedule is one entry of schedules: a power action on some machines at
// the times a cron expression names, in waves.
type Schedule struct {
	// Name identifies the schedule in logs, the audit trail
	// (schedule:NAME) and /metrics; unique.
	Name string `yaml:"name"`
	// At is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week), e.g. "30 7 * * 1-5", in the
	// server's time zone unless it starts with CRON_TZ=Zone.
	At string `yaml:"at"`
	// Action is on, off, cycle or reset.
	Action string `yaml:"action"`
	// The machines: a profile's, some by name or MAC, or all; exactly one.
	Profile  string   `yaml:"profile"`
	Machines []string `yaml:"machines"`
	All      bool     `yaml:"all"`
	// Wave is N/T, e.g. 20/10s; empty: all at once.
	Wave string `yaml:"wave"`
}

var scheduleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validateSchedules checks schedules: the start is refused with every
// entry that does not parse, named by key.
func (c *Config) validateSchedules(bad func(key, format string, args ...any)) {
	seen := map[string]int{}
	for i, s := range c.Schedules {
		key := fmt.Sprintf("schedules[%d]", i)
		if !scheduleNameRE.MatchString(s.Name) {
			bad(key+".name", "want a name of letters, digits, . _ - (at most 63), got %q", s.Name)
		} else if j, dup := seen[s.Name]; dup {
			bad(key+".name", "%s is already the name of schedules[%d]", s.Name, j)
		} else {
			seen[s.Name] = i
		}
		if _, err := cron.ParseStandard(s.At); err != nil {
			bad(key+".at", "want a cron expression like \"30 7 * * 1-5\" (minute hour day month weekday), got %q: %v", s.At, err)
		}
		if a, err := power.ParseAction(s.Action); err != nil || a == power.Status {
			bad(key+".action", "want on, off, cycle or reset, got %q", s.Action)
		}
		if err := (power.Selection{Machines: s.Machines, Profile: s.Profile, All: s.All}).Check(); err != nil {
			bad(key, "name the machines with exactly one of profile, machines or all: true")
		}
		if _, err := power.ParseWave(s.Wave); err != nil {
			bad(key+".wave", "%v", err)
		}
	}
}
