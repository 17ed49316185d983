package config

import (
	"strings"
	"testing"
)

func TestSchedules(t *testing.T) {
	good := `dhcp: {mode: off}
schedules:
  - {name: lab-morning, at: "30 7 * * 1-5", action: on, profile: lab, wave: 20/10s}
  - {name: lab-night, at: "CRON_TZ=Europe/Paris 0 22 * * *", action: off, all: true}
  - {name: pc1-weekly, at: "0 3 * * 0", action: cycle, machines: [pc1]}
`
	c, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Schedules) != 3 || c.Schedules[0].Wave != "20/10s" || !c.Schedules[1].All {
		t.Fatalf("schedules parsed as %+v", c.Schedules)
	}
	// Each bad entry refuses the start, naming its key.
	for _, tt := range []struct{ entry, key string }{
		{`{name: x, at: "30 7 * *", action: on, all: true}`, "schedules[0].at"},
		{`{name: x, at: "61 7 * * *", action: on, all: true}`, "schedules[0].at"},
		{`{name: x, at: "@fortnightly", action: on, all: true}`, "schedules[0].at"},
		{`{name: x, at: "30 7 * * *", action: status, all: true}`, "schedules[0].action"},
		{`{name: x, at: "30 7 * * *", action: on}`, "schedules[0]: name the machines"},
		{`{name: x, at: "30 7 * * *", action: on, all: true, profile: lab}`, "schedules[0]: name the machines"},
		{`{name: x, at: "30 7 * * *", action: on, all: true, wave: "20/forever"}`, "schedules[0].wave"},
		{`{name: "", at: "30 7 * * *", action: on, all: true}`, "schedules[0].name"},
	} {
		_, err := Parse(strings.NewReader("dhcp: {mode: off}\nschedules:\n  - " + tt.entry + "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: %v; want an error naming %s", tt.entry, err, tt.key)
		}
	}
	_, err = Parse(strings.NewReader("dhcp: {mode: off}\nschedules:\n  - {name: a, at: \"0 1 * * *\", action: on, all: true}\n  - {name: a, at: \"0 2 * * *\", action: off, all: true}\n"))
	if err == nil || !strings.Contains(err.Error(), "schedules[1].name") {
		t.Errorf("duplicate names: %v; want schedules[1].name refused", err)
	}
}
