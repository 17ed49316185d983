package storm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

func TestRealReport(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	end := at(40)
	records := []telemetry.Boot{
		{MAC: "52:54:00:00:00:01", State: telemetry.StateComplete, Start: at(3), End: &end,
			Power:  &telemetry.PowerCause{Time: at(0.5), Action: "on", Cause: "api:admin"},
			DHCP:   []telemetry.DHCPExchange{{Type: "ACK", Addr: "10.0.0.100"}},
			Phases: []telemetry.Phase{{Kind: "dhcp", Start: at(3), Secs: 2}, {Kind: "tftp", Start: at(6), Secs: 1, Bytes: 1000}, {Kind: "dhcp", Start: at(8), Secs: 1}, {Kind: "http", Start: at(10), Secs: 20, Bytes: 50000}, {Kind: "milestone", Start: at(10)}, {Kind: "complete", Start: end}}},
		// A boot nobody powered on: not this storm's.
		{MAC: "52:54:00:00:00:03", State: telemetry.StateComplete, Start: at(1), End: &end},
		{MAC: "52:54:00:00:00:03", State: telemetry.StateBooting, Start: at(9), Power: &telemetry.PowerCause{Time: at(5)}},
	}
	powered := []Powered{
		{MAC: "52:54:00:00:00:01", At: at(0.5)},
		{MAC: "52:54:00:00:00:02", At: at(0.5), Err: "ipmi 10.0.9.2: no answer from the BMC"},
		{MAC: "52:54:00:00:00:03", At: at(5)},
	}
	// The records go through JSON, as GET /boots sends them.
	b, err := json.Marshal(records)
	if err != nil {
		t.Fatal(err)
	}
	var boots []RealBoot
	if err := json.Unmarshal(b, &boots); err != nil {
		t.Fatal(err)
	}
	rep := RealReport("lab", t0, powered, boots, true)
	m := rep.Machines
	if m[0].Result != "ok" || m[0].Boot != 39.5 || m[0].IP != "10.0.0.100" || m[0].Phases.DHCP.Duration != 3 || m[0].Phases.HTTP.Bytes != 50000 || m[0].Phases.Done == nil {
		t.Errorf("pc1: %+v, want ok in 39.5 s from power-on with 3 s of DHCP and the HTTP bytes", m[0])
	}
	if m[1].Result != "power: ipmi 10.0.9.2: no answer from the BMC" {
		t.Errorf("pc2: %q, want the driver's error", m[1].Result)
	}
	if m[2].Result != "no boot complete within the timeout" {
		t.Errorf("pc3: %q, want a timeout", m[2].Result)
	}
	if s := rep.Summary; s.Booted != 1 || s.Failed != 2 || s.Phases["boot"].Count != 1 {
		t.Errorf("summary %+v, want 1 booted and 2 failed", s)
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "3 real machines on profile lab: 1 booted, 2 failed") {
		t.Errorf("table:\n%s\nwant the simulator's summary line for the profile", tbl.String())
	}
}
