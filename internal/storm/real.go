package storm

import (
	"fmt"
	"strings"
	"time"
)

// This file is `bootfleet storm --real PROFILE`: instead of emulated
// machines, the real machines of a profile, powered on through their
// drivers, timed from their boot records, and reported in the same table.

// RealBoot is what a real storm reads of a boot record: the fields of
// GET /api/v1/boots it needs, by their JSON names (telemetry.Boot), so
// this package does not pull in the server's telemetry.
type RealBoot struct {
	MAC    string     `json:"mac"`
	Start  time.Time  `json:"start"`
	End    *time.Time `json:"end"`
	State  string     `json:"state"` // booting, complete or failed
	Reason string     `json:"reason"`
	DHCP   []struct {
		Addr string `json:"addr"`
	} `json:"dhcp"`
	Phases []struct {
		Kind  string    `json:"kind"` // dhcp, tftp, http, nbd, milestone, complete
		Start time.Time `json:"start"`
		Secs  float64   `json:"seconds"`
		Bytes int64     `json:"bytes"`
	} `json:"phases"`
	// Power is the power command the boot followed; nil for none.
	Power *struct {
		Time time.Time `json:"time"`
	} `json:"power"`
}

// Record states a real storm tells apart.
const (
	recordBooting  = "booting"
	recordComplete = "complete"
)

// Powered is one machine a real storm's power command reached.
type Powered struct {
	MAC string
	At  time.Time // when its driver was called
	Err string    // the driver's error; "" when it was powered on
}

// RealReport builds a storm report from the power command's results and
// the boot records since it started: each machine's first boot that
// followed a power command, from its power-on. A machine whose driver
// failed is failed with that error; one without a finished boot by now
// is pending ("no boot complete within the timeout" when timedOut).
func RealReport(profile string, t0 time.Time, powered []Powered, boots []RealBoot, timedOut bool) *Report {
	rep := &Report{Interface: "profile " + profile, Firmware: "real", Clients: len(powered)}
	byMAC := map[string]RealBoot{}
	for _, b := range boots {
		if b.Power == nil {
			continue
		}
		mac := strings.ToLower(b.MAC)
		if old, ok := byMAC[mac]; !ok || b.Start.Before(old.Start) {
			byMAC[mac] = b
		}
	}
	for _, p := range powered {
		m := Machine{MAC: p.MAC, PowerOn: p.At.Sub(t0).Seconds()}
		b, ok := byMAC[strings.ToLower(p.MAC)]
		switch {
		case p.Err != "":
			m.Result = "power: " + p.Err
		case !ok || b.State == recordBooting:
			m.Result = "not finished when the storm stopped"
			if timedOut {
				m.Result = "no boot complete within the timeout"
			}
			if ok {
				m.Phases = realPhases(b, t0)
			}
		default:
			m.Phases = realPhases(b, t0)
			end := b.Start
			if b.End != nil {
				end = *b.End
			}
			m.Boot = end.Sub(p.At).Seconds()
			m.Result = "ok"
			if b.State != recordComplete {
				m.Result = fmt.Sprintf("boot: %s", orState(b.Reason, b.State))
			}
		}
		if ok {
			for _, d := range b.DHCP {
				if d.Addr != "" {
					m.IP = d.Addr
				}
			}
		}
		rep.Machines = append(rep.Machines, m)
	}
	rep.Summary = summarize(rep.Machines, 0)
	return rep
}

// realPhases folds a boot record's timeline into the simulator's phases:
// each kind's first start and summed seconds and bytes.
func realPhases(b RealBoot, t0 time.Time) Phases {
	var ps Phases
	for _, tp := range b.Phases {
		kind := tp.Kind
		if kind == "complete" {
			kind = "done"
		}
		var slot **Phase
		switch kind {
		case "dhcp":
			slot = &ps.DHCP
		case "tftp":
			slot = &ps.TFTP
		case "http":
			slot = &ps.HTTP
		case "nbd":
			slot = &ps.NBD
		case "done":
			slot = &ps.Done
		default:
			continue
		}
		if *slot == nil {
			*slot = &Phase{Start: tp.Start.Sub(t0).Seconds()}
		}
		(*slot).Duration += tp.Secs
		(*slot).Bytes += tp.Bytes
	}
	return ps
}

func orState(reason, state string) string {
	if reason != "" {
		return reason
	}
	return state
}
