package power

import (
	"context"
	"errors"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Action is what a power command asks.
type Action string

// Actions. Cycle is off then on (the machine sees power loss); Reset is a
// warm reset (it does not).
const (
	On     Action = "on"
	Off    Action = "off"
	Cycle  Action = "cycle"
	Reset  Action = "reset"
	Status Action = "status"
)

// Actions lists every Action, for flags and messages.
var Actions = []Action{On, Off, Cycle, Reset, Status}

// ParseAction checks s names an Action.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("power: want an action on, off, cycle, reset or status, got %q", s)
}

// State is what a driver says after an action: the power state it read
// back from the machine's controller, or only that a packet was sent.
type State string

// States.
const (
	StateOn   State = "on"
	StateOff  State = "off"
	StateSent State = "sent" // Wake-on-LAN: nothing comes back
)

// Target is one machine and how to power it.
type Target struct {
	Machine  inventory.Machine
	Settings inventory.PowerSettings
}

// Driver powers machines of one kind. Do carries out a on t and returns
// the state it can tell; it must return by ctx's deadline, and its errors
// must never carry t's secrets.
type Driver interface {
	Do(ctx context.Context, t Target, a Action) (State, error)
}

// ErrUnsupported: the machine's driver cannot do the action (Wake-on-LAN
// cannot switch a machine off or read its state).
var ErrUnsupported = errors.New("power: not supported by this driver")

type causeKey struct{}

// WithCause returns ctx carrying who asked for a command ("api:TOKEN",
// "schedule:NAME"), which boot records name.
func WithCause(ctx context.Context, cause string) context.Context {
	return context.WithValue(ctx, causeKey{}, cause)
}

// CauseOf is the cause WithCause set, or "".
func CauseOf(ctx context.Context) string {
	s, _ := ctx.Value(causeKey{}).(string)
	return s
}

// Starts reports whether a succeeds by starting a boot: on, cycle, reset.
func (a Action) Starts() bool { return a == On || a == Cycle || a == Reset }
