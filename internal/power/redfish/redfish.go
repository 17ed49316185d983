package redfish

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/power"
)

// Driver is the Redfish power driver. The zero value is ready to use.
type Driver struct {
	// Settle bounds how long Do polls PowerState after on or off for the
	// BMC to report the change; default 10s (a BMC takes a few seconds).
	// Do returns the state it read last.
	Settle time.Duration
	// Poll is the interval of those reads; default 500ms.
	Poll time.Duration
	// Transport replaces the HTTPS transport; for tests.
	Transport http.RoundTripper
}

// resetTypes are the ResetType values for each action, best first; the
// first the system allows is used.
var resetTypes = map[power.Action][]string{
	power.On:    {"On", "PushPowerButton"},
	power.Off:   {"ForceOff", "GracefulShutdown", "PushPowerButton"},
	power.Cycle: {"PowerCycle", "ForceRestart"},
	power.Reset: {"ForceRestart", "GracefulRestart"},
}

// Do implements power.Driver. Host is host[:port], or
// host[:port]/redfish/v1/Systems/ID to pick one of several systems.
func (d Driver) Do(ctx context.Context, t power.Target, a power.Action) (power.State, error) {
	s := t.Settings
	host, sysPath, _ := strings.Cut(s.Host, "/")
	c := newClient(host, s.User, s.Password, s.Insecure, d.Transport)
	path, err := d.system(ctx, c, sysPath)
	if err != nil {
		return "", err
	}
	sys, err := d.read(ctx, c, path)
	if err != nil {
		return "", err
	}
	if a == power.Status {
		return stateOf(sys.PowerState), nil
	}
	act, want := a, power.StateOn
	if a == power.Off {
		want = power.StateOff
	} else if (a == power.Cycle || a == power.Reset) && stateOf(sys.PowerState) == power.StateOff {
		// Restarting a machine that is off fails on most BMCs; what the
		// admin wants is the machine up, freshly booted.
		act = power.On
	}
	rt, err := pick(sys.Actions.Reset.Allowed, resetTypes[act])
	if err != nil {
		return "", fmt.Errorf("redfish %s: %s: %w", host, a, err)
	}
	if err := c.post(ctx, sys.Actions.Reset.Target, map[string]string{"ResetType": rt}); err != nil {
		return "", err
	}
	return d.readBack(ctx, c, path, want)
}

// system is the path of the machine's ComputerSystem: the one named in
// the host setting, or the service's only one.
func (d Driver) system(ctx context.Context, c *client, named string) (string, error) {
	if named != "" {
		p := "/" + named
		if !isPath(p) {
			return "", fmt.Errorf("redfish %s: host path %q: want host/redfish/v1/Systems/ID", c.base, p)
		}
		return p, nil
	}
	b, err := c.get(ctx, "/redfish/v1/")
	if err != nil {
		return "", err
	}
	root, err := DecodeServiceRoot(b)
	if err != nil {
		return "", err
	}
	if b, err = c.get(ctx, root.Systems.ID); err != nil {
		return "", err
	}
	col, err := DecodeCollection(b)
	if err != nil {
		return "", err
	}
	switch len(col.Members) {
	case 1:
		return col.Members[0].ID, nil
	case 0:
		return "", fmt.Errorf("redfish %s: the BMC lists no ComputerSystem under %s", c.base, root.Systems.ID)
	}
	return "", fmt.Errorf("redfish %s: the BMC has %d systems; name one in the host setting, e.g. %s%s",
		c.base, len(col.Members), strings.TrimPrefix(c.base, "https://"), col.Members[0].ID)
}

func (d Driver) read(ctx context.Context, c *client, path string) (System, error) {
	b, err := c.get(ctx, path)
	if err != nil {
		return System{}, err
	}
	return DecodeSystem(b)
}

// readBack polls PowerState until it is want or Settle has passed.
func (d Driver) readBack(ctx context.Context, c *client, path string, want power.State) (power.State, error) {
	settle, poll := d.Settle, d.Poll
	if settle <= 0 {
		settle = 10 * time.Second
	}
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	deadline := time.Now().Add(settle)
	for {
		sys, err := d.read(ctx, c, path)
		if err != nil {
			return "", fmt.Errorf("read power state back: %w", err)
		}
		st := stateOf(sys.PowerState)
		if st == want || time.Now().After(deadline) {
			return st, nil
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			return st, nil
		}
	}
}

// pick returns the first of prefer the system allows; an empty allowed
// list means the service did not say, and the first is tried.
func pick(allowed, prefer []string) (string, error) {
	if len(allowed) == 0 {
		return prefer[0], nil
	}
	for _, p := range prefer {
		if slices.Contains(allowed, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("the system allows ResetType %v, none of %v", allowed, prefer)
}

// stateOf maps PowerState: PoweringOn counts as on (it was switched on),
// PoweringOff and Paused as off.
func stateOf(ps string) power.State {
	switch ps {
	case "On", "PoweringOn":
		return power.StateOn
	}
	return power.StateOff
}
