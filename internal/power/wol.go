package power

import (
	"context"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/wol"
)

// WOL is the Wake-on-LAN driver. It can only wake: the machine's NIC
// answers nothing, so On says only StateSent.
type WOL struct {
	// Interface is the boot LAN's interface (the config's interface):
	// a machine that DHCPs there listens for its magic packet there.
	Interface string
	// Port is the UDP port; 0 means wol.Port (9). For tests.
	Port int
}

// Do implements Driver.
func (d WOL) Do(ctx context.Context, t Target, a Action) (State, error) {
	if a != On {
		return "", fmt.Errorf("wol: %s: %w: Wake-on-LAN can only power a machine on; set an ipmi or redfish driver for it (bootfleet machine power %s ...)",
			a, ErrUnsupported, t.Machine.MAC)
	}
	var pwd []byte
	if t.Settings.SecureOn != "" {
		var err error
		if pwd, err = inventory.ParseSecureOn(t.Settings.SecureOn); err != nil {
			return "", err
		}
	}
	err := wol.Send(ctx, wol.Target{MAC: t.Machine.MAC, Password: pwd, Interface: d.Interface,
		Broadcast: t.Settings.Broadcast, Port: d.Port})
	if err != nil {
		return "", err
	}
	return StateSent, nil
}
