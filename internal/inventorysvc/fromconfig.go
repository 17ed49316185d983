package inventorysvc

import (
	"errors"
	"net"
	"os"
	"strings"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
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
		ARM64:   inventory.ArchBoot{Kernel: cp.ARM64.Kernel, Initrd: cp.ARM64.Initrd},
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
	return inventory.Machine{MAC: hw, Name: cm.Name, Profile: cm.Profile, IP: ip, Channel: cm.RootChannel, Source: inventory.SourceConfig}, nil
}

// policyFromConfig is what the file says boots the machines nobody
// enrolled: default_profile, discovery_profile and discovery. Profiles and
// machines come from the store.
func policyFromConfig(c *config.Config) machineview.Input {
	in := machineview.Input{DefaultProfile: c.DefaultProfile, UnknownProfile: c.DefaultProfile}
	if c.DiscoveryProfile != "" {
		in.UnknownProfile = c.DiscoveryProfile
	}
	if c.Discovery == "ignore" {
		in.UnknownProfile = ""
	}
	return in
}

// powerFromConfig returns the power settings machines[i].power declares
// for mac, with the secrets read from their files. Errors name the key.
func powerFromConfig(key string, mac net.HardwareAddr, cp config.MachinePower) (inventory.PowerSettings, error) {
	p := inventory.PowerSettings{MAC: mac, Driver: cp.Driver, Host: cp.Host, User: cp.User, CipherSuite: cp.CipherSuite,
		Insecure: cp.Insecure, Source: inventory.SourceConfig}
	var err error
	if p.Password, err = secretFile(key+".password_file", cp.PasswordFile); err != nil {
		return p, err
	}
	if p.SecureOn, err = secretFile(key+".secureon_file", cp.SecureOnFile); err != nil {
		return p, err
	}
	if cp.Broadcast != "" {
		if p.Broadcast = net.ParseIP(cp.Broadcast).To4(); p.Broadcast == nil {
			return p, inventory.Invalid(key+".broadcast", "want an IPv4 broadcast address like 10.1.2.255, got %q", cp.Broadcast)
		}
	}
	if err := p.Validate(); err != nil {
		var ie *inventory.Error
		if errors.As(err, &ie) {
			return p, &inventory.Error{Kind: ie.Kind, Field: key + "." + ie.Field, Msg: ie.Msg}
		}
		return p, err
	}
	return p, nil
}

// secretFile reads a secret named by the config; "" is none.
func secretFile(key, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", inventory.Invalid(key, "cannot read the secret: %v; create the file or fix the path", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
