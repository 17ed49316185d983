package inventorysvc

import (
	"errors"
	"net"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/fleet"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// This file is the one place where the config file's schema becomes the
// inventory's model: nothing else turns a config.Profile or config.Machine
// into something a server uses.

// profileKeys names the config file's key for each inventory field whose
// name differs, so that an error about a profile names the key to fix.
var profileKeys = map[string]string{
	"root_image":   "root.image",
	"overlay":      "root.overlay",
	"root_kernel":  "root.kernel",
	"root_channel": "root.channel",
}

// profileFromConfig returns the profile the file declares under
// profiles.name, owned by the config and validated by the inventory's
// rules (so an empty overlay of a root becomes ephemeral). Its errors are
// *inventory.Error whose Field is the file's key, e.g.
// profiles.pc.root.overlay.
func profileFromConfig(name string, cp config.Profile) (inventory.Profile, error) {
	p := inventory.Profile{
		Name:    name,
		Kernel:  cp.Kernel,
		Initrd:  cp.Initrd,
		Cmdline: cp.Cmdline,
		Root:    inventory.Root{Image: cp.Root.Image, Overlay: cp.Root.Overlay, Kernel: cp.Root.Kernel, Channel: cp.Root.Channel},
		Loader:  cp.Loader,
		Source:  inventory.SourceConfig,
	}
	if err := p.Validate(); err != nil {
		var ie *inventory.Error
		if !errors.As(err, &ie) {
			return inventory.Profile{}, err
		}
		key := ie.Field
		if k, ok := profileKeys[key]; ok {
			key = k
		}
		return inventory.Profile{}, &inventory.Error{Kind: ie.Kind, Field: "profiles." + name + "." + key, Msg: ie.Msg}
	}
	return p, nil
}

// machineFromConfig returns the machine an entry of machines: declares,
// owned by the config. State and labels are not the file's to set.
func machineFromConfig(cm config.Machine) (inventory.Machine, error) {
	hw, err := inventory.ParseMAC(cm.MAC)
	if err != nil {
		return inventory.Machine{}, err
	}
	var ip net.IP
	if cm.IP != "" {
		if ip = net.ParseIP(cm.IP).To4(); ip == nil {
			return inventory.Machine{}, inventory.Invalid("ip", "want an IPv4 address, got %q", cm.IP)
		}
	}
	return inventory.Machine{MAC: hw, Name: cm.Name, Profile: cm.Profile, IP: ip, Source: inventory.SourceConfig}, nil
}

// policyFromConfig is what the file says boots the machines nobody
// enrolled: default_profile, discovery_profile and discovery. Profiles and
// machines come from the store.
func policyFromConfig(c *config.Config) fleet.Input {
	in := fleet.Input{DefaultProfile: c.DefaultProfile, UnknownProfile: c.DefaultProfile}
	if c.DiscoveryProfile != "" {
		in.UnknownProfile = c.DiscoveryProfile
	}
	if c.Discovery == "ignore" {
		in.UnknownProfile = ""
	}
	return in
}
