package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/bootfleet/bootfleet/internal/power"
)

// DefaultPort is RMCP's UDP port.
const DefaultPort = 623

// Driver is the IPMI power driver. The zero value is ready to use.
type Driver struct {
	// Attempt bounds one UDP exchange; the library retries four times.
	// Default 1s, as ipmitool's lanplus.
	Attempt time.Duration
	// Settle bounds how long Do polls the power state after on or off
	// for the BMC to report the change; default 5s. Do returns the
	// state it read last, so a slow BMC shows as the old state, not as
	// an error.
	Settle time.Duration
}

var controls = map[power.Action]chassis.ChassisControl{
	power.On:    chassis.ChassisControlPowerUp,
	power.Off:   chassis.ChassisControlPowerDown,
	power.Cycle: chassis.ChassisControlPowerCycle,
	power.Reset: chassis.ChassisControlHardReset,
}

// Do implements power.Driver.
func (d Driver) Do(ctx context.Context, t power.Target, a power.Action) (power.State, error) {
	s := t.Settings
	host, port, err := splitHost(s.Host)
	if err != nil {
		return "", err
	}
	attempt := d.Attempt
	if attempt <= 0 {
		attempt = time.Second
	}
	c, err := client.NewClient(host, port, s.User, s.Password)
	if err != nil {
		return "", fmt.Errorf("ipmi %s: %w; check the user name", s.Host, err)
	}
	c.WithInterface(client.InterfaceLanplus).WithTimeout(attempt).WithCipherSuiteID(types.CipherSuiteID(s.CipherSuite))
	if err := c.Connect(ctx); err != nil {
		return "", connectError(ctx, s.Host, s.User, s.CipherSuite, err)
	}
	defer c.Close(context.WithoutCancel(ctx))

	before, err := c.GetChassisStatus(ctx)
	if err != nil {
		return "", fmt.Errorf("ipmi %s: read power state: %w", s.Host, err)
	}
	if a == power.Status {
		return stateOf(before.PowerIsOn), nil
	}
	ctl := controls[a]
	var want *bool
	switch a {
	case power.On:
		want = ptr(true)
	case power.Off:
		want = ptr(false)
	case power.Cycle, power.Reset:
		// Cycling or resetting a machine that is off fails on most BMCs;
		// what the admin wants is the machine up, freshly booted.
		if !before.PowerIsOn {
			ctl, want = chassis.ChassisControlPowerUp, ptr(true)
		}
	}
	if _, err := c.ChassisControl(ctx, ctl); err != nil {
		return "", fmt.Errorf("ipmi %s: chassis control %s: %w", s.Host, a, err)
	}
	return d.readBack(ctx, c, s.Host, want)
}

// readBack polls the power state until it is want (nil: any) or Settle
// has passed, and returns the last state read.
func (d Driver) readBack(ctx context.Context, c *client.Client, host string, want *bool) (power.State, error) {
	settle := d.Settle
	if settle <= 0 {
		settle = 5 * time.Second
	}
	deadline := time.Now().Add(settle)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.GetChassisStatus(ctx)
		if err != nil {
			return "", fmt.Errorf("ipmi %s: read power state back: %w", host, err)
		}
		if want == nil || st.PowerIsOn == *want || time.Now().After(deadline) {
			return stateOf(st.PowerIsOn), nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return stateOf(st.PowerIsOn), nil
		}
	}
}

func ptr[T any](v T) *T { return &v }

func stateOf(on bool) power.State {
	if on {
		return power.StateOn
	}
	return power.StateOff
}

// connectError says what most likely went wrong in session setup. The
// library's text names the step; it never holds the password.
func connectError(ctx context.Context, host, user string, suite int, err error) error {
	msg := err.Error()
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "deadline") ||
		strings.Contains(msg, "timeout") || strings.Contains(msg, "connection refused"):
		return fmt.Errorf("ipmi %s: no answer from the BMC; check its address, that IPMI over LAN is enabled and UDP 623 is open: %w", host, err)
	case strings.Contains(msg, "rakp") || strings.Contains(msg, "RAKP") || strings.Contains(msg, "authentication") || strings.Contains(msg, "unauthorized"):
		return fmt.Errorf("ipmi %s: the BMC refused user %q: wrong user or password (set them with bootfleet machine power): %w", host, user, err)
	case strings.Contains(msg, "Open Session"):
		return fmt.Errorf("ipmi %s: the BMC refused cipher suite %d; pick one it offers (ipmitool channel getciphers ipmi) with --cipher-suite: %w", host, suite, err)
	}
	return fmt.Errorf("ipmi %s: open a lanplus session as %q with cipher suite %d: %w", host, user, suite, err)
}

// splitHost reads host or host:port.
func splitHost(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return s, DefaultPort, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("ipmi: host %q: want host or host:port with a port 1..65535", s)
	}
	return host, port, nil
}
