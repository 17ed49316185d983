package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
)

// PowerRunner carries a power command out (a *power.Runner).
type PowerRunner interface {
	Run(ctx context.Context, a power.Action, ts []power.Target, w power.Wave, report func(power.Event)) []power.Result
}

// PowerSettings is a machine's power settings on the wire. Password and
// secureon are write-only: an answer says "(set)" when one is stored. On
// PUT, an absent password or secureon keeps the stored one (so changing a
// BMC's address needs no password), and "" removes it.
type PowerSettings struct {
	Driver      string  `json:"driver"`
	Host        string  `json:"host,omitempty"`
	User        string  `json:"user,omitempty"`
	Password    *string `json:"password,omitempty"`
	CipherSuite int     `json:"cipher_suite,omitempty"`
	Insecure    bool    `json:"insecure,omitempty"`
	Broadcast   string  `json:"broadcast,omitempty"`
	SecureOn    *string `json:"secureon,omitempty"`
	Source      string  `json:"source,omitempty"`
}

func powerOut(p inventory.PowerSettings) PowerSettings {
	r := p.Redacted()
	out := PowerSettings{Driver: r.Driver, Host: r.Host, User: r.User, CipherSuite: r.CipherSuite,
		Insecure: r.Insecure, Source: string(r.Source)}
	if r.Password != "" {
		out.Password = &r.Password
	}
	if r.SecureOn != "" {
		out.SecureOn = &r.SecureOn
	}
	if r.Broadcast != nil {
		out.Broadcast = r.Broadcast.String()
	}
	return out
}

// machinePower finds the machine in the path and its stored settings, or
// Wake-on-LAN when it has none.
func (s *server) machinePower(r *http.Request) (inventory.Machine, inventory.PowerSettings, error) {
	m, err := s.lookup(r)
	if err != nil {
		return m, inventory.PowerSettings{}, err
	}
	p, err := s.cfg.Store.GetPower(r.Context(), m.MAC)
	if errors.Is(err, inventory.ErrNotFound) {
		return m, inventory.PowerSettings{MAC: m.MAC, Driver: inventory.DriverWOL}, nil
	}
	return m, p, err
}

func (s *server) getPower(w http.ResponseWriter, r *http.Request) error {
	_, p, err := s.machinePower(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, powerOut(p))
	return nil
}

func (s *server) putPower(w http.ResponseWriter, r *http.Request) error {
	// The body holds secrets: the trail gets the redacted settings once
	// they are stored, and this when the request fails.
	setNote(r, "(body not recorded: it may hold secrets)")
	m, old, err := s.machinePower(r)
	if err != nil {
		return err
	}
	var in PowerSettings
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := readOnly(old.Source, "driver", "the power settings of "+m.String()); err != nil {
		return err
	}
	p := inventory.PowerSettings{MAC: m.MAC, Driver: in.Driver, Host: in.Host, User: in.User,
		CipherSuite: in.CipherSuite, Insecure: in.Insecure}
	if p.Driver == "" {
		p.Driver = inventory.DriverWOL
	}
	// An absent secret is kept only for the same driver: a new kind of
	// controller does not inherit the old one's password.
	if p.Driver == old.Driver {
		p.Password, p.SecureOn = old.Password, old.SecureOn
	}
	if in.Password != nil {
		p.Password = *in.Password
	}
	if in.SecureOn != nil {
		p.SecureOn = *in.SecureOn
	}
	if in.Broadcast != "" {
		if p.Broadcast = net.ParseIP(in.Broadcast).To4(); p.Broadcast == nil {
			return inventory.Invalid("broadcast", "want an IPv4 broadcast address like 10.1.2.255, got %q", in.Broadcast)
		}
	}
	if err := s.cfg.Store.PutPower(r.Context(), p); err != nil {
		return err
	}
	p, err = s.cfg.Store.GetPower(r.Context(), m.MAC)
	if err != nil {
		return err
	}
	setNote(r, p.String())
	s.changed(r, m.MAC.String(), "machine.power-set", p.String())
	writeJSON(w, http.StatusOK, powerOut(p))
	return nil
}

func (s *server) deletePower(w http.ResponseWriter, r *http.Request) error {
	m, old, err := s.machinePower(r)
	if err != nil {
		return err
	}
	if err := readOnly(old.Source, "driver", "the power settings of "+m.String()); err != nil {
		return err
	}
	if err := s.cfg.Store.DeletePower(r.Context(), m.MAC); err != nil {
		return err
	}
	s.changed(r, m.MAC.String(), "machine.power-set", "driver=wol (default)")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// PowerRequest is the body of POST /power: an action on the machines
// named, those of a profile, or all; exactly one of the three.
type PowerRequest struct {
	Action   string   `json:"action"`
	Machines []string `json:"machines,omitempty"` // names or MACs
	Profile  string   `json:"profile,omitempty"`
	All      bool     `json:"all,omitempty"`
	Wave     string   `json:"wave,omitempty"` // N/T, e.g. 20/10s; empty: all at once
}

// PowerLine is one line of POST /power's answer, which streams JSON lines
// as the command runs: a "wave" line as each wave starts, a "result" line
// per machine, and a "done" line last.
type PowerLine struct {
	Type   string     `json:"type"` // wave, result or done
	Wave   int        `json:"wave,omitempty"`
	Waves  int        `json:"waves,omitempty"`
	Size   int        `json:"size,omitempty"` // wave: machines in it; done: machines in all
	MAC    string     `json:"mac,omitempty"`
	Name   string     `json:"name,omitempty"`
	Driver string     `json:"driver,omitempty"`
	State  string     `json:"state,omitempty"`
	Error  string     `json:"error,omitempty"`
	At     *time.Time `json:"at,omitempty"`
	Failed int        `json:"failed,omitempty"` // done: how many failed
}

func (s *server) runPower(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Power == nil {
		return inventory.Invalid("", "this server has no power drivers configured")
	}
	var in PowerRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	a, err := power.ParseAction(in.Action)
	if err != nil {
		return inventory.Invalid("action", "want on, off, cycle, reset or status, got %q", in.Action)
	}
	wave, err := power.ParseWave(in.Wave)
	if err != nil {
		return inventory.Invalid("wave", "%v", err)
	}
	sel := power.Selection{Machines: in.Machines, Profile: in.Profile, All: in.All}
	ts, err := power.Select(r.Context(), s.cfg.Store, sel)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(l PowerLine) {
		enc.Encode(l)
		rc.Flush()
	}
	who := callerOf(r).name
	res := s.cfg.Power.Run(power.WithCause(r.Context(), "api:"+who), a, ts, wave, func(e power.Event) {
		if e.Result == nil {
			send(PowerLine{Type: "wave", Wave: e.Wave, Waves: e.Waves, Size: e.Size})
			return
		}
		l := resultLine(e.Result)
		l.Waves = e.Waves
		send(l)
		s.powerEvent(r, e.Result, a, who)
	})
	failed := 0
	for _, x := range res {
		if x.Err != nil {
			failed++
		}
	}
	setNote(r, fmt.Sprintf("%s %s: %d machines, %d failed", a, sel, len(res), failed))
	send(PowerLine{Type: "done", Size: len(res), Failed: failed})
	return nil
}

func resultLine(x *power.Result) PowerLine {
	l := PowerLine{Type: "result", Wave: x.Wave, MAC: x.Target.Machine.MAC.String(), Name: x.Target.Machine.Name,
		Driver: x.Target.Settings.Driver, State: string(x.State)}
	if !x.At.IsZero() {
		at := x.At.UTC()
		l.At = &at
	}
	if x.Err != nil {
		l.Error = x.Err.Error()
	}
	return l
}

// powerEvent puts the command in the machine's timeline, where its next
// boot can be tied to it.
func (s *server) powerEvent(r *http.Request, x *power.Result, a power.Action, who string) {
	d := fmt.Sprintf("%s by %s via %s: ", a, who, x.Target.Settings.Driver)
	if x.Err != nil {
		d += "failed: " + x.Err.Error()
	} else {
		d += string(x.State)
	}
	ctx := context.WithoutCancel(r.Context())
	if err := s.cfg.Store.AddEvent(ctx, inventory.Event{Time: x.At, MAC: x.Target.Machine.MAC, Kind: "power", Details: d}); err != nil {
		s.log.Warn("record power event", "mac", x.Target.Machine.MAC.String(), "err", err)
	}
}
