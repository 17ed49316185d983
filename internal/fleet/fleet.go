package fleet

import (
	"fmt"
	"net"
	"sync/atomic"

	"github.com/bootfleet/bootfleet/internal/config"
)

// Machine is a known machine.
type Machine struct {
	MAC     net.HardwareAddr
	Name    string
	Profile string
	IP      net.IP // reserved address, nil if none
	// Enrolled is false for a machine that was only discovered: it booted
	// unasked and nobody has set it up yet.
	Enrolled bool
}

// Target is what one machine boots.
type Target struct {
	Machine Machine // MAC always set; Name empty for unlisted machines
	Known   bool    // listed, as opposed to booted through the default profile
	Profile string
	Spec    config.Profile
}

// snapshot is immutable once published.
type snapshot struct {
	machines       map[string]Machine // key: MAC string
	reserved       map[string]Machine // key: reserved IP string
	profiles       map[string]config.Profile
	defaultProfile string // for listed machines without a profile
	unknownProfile string // for machines nobody enrolled: discovered or never seen
}

// View answers lookups from the current snapshot.
type View struct {
	cur atomic.Pointer[snapshot]
}

// FromConfig builds a view from the machines and profiles of c.
func FromConfig(c *config.Config) (*View, error) {
	v := &View{}
	if err := v.Apply(c); err != nil {
		return nil, err
	}
	return v, nil
}

// Apply replaces the view's contents with what c says.
func (v *View) Apply(c *config.Config) error {
	s := &snapshot{
		machines:       make(map[string]Machine, len(c.Machines)),
		reserved:       map[string]Machine{},
		profiles:       make(map[string]config.Profile, len(c.Profiles)),
		defaultProfile: c.DefaultProfile,
		unknownProfile: c.DefaultProfile,
	}
	if c.DiscoveryProfile != "" {
		s.unknownProfile = c.DiscoveryProfile
	}
	if c.Discovery == "ignore" {
		s.unknownProfile = ""
	}
	for name, p := range c.Profiles {
		s.profiles[name] = p
	}
	for i, m := range c.Machines {
		hw, err := net.ParseMAC(m.MAC)
		if err != nil {
			return fmt.Errorf("machines[%d].mac: %w", i, err)
		}
		var ip net.IP
		if m.IP != "" {
			ip = net.ParseIP(m.IP).To4()
		}
		s.machines[hw.String()] = Machine{MAC: hw, Name: m.Name, Profile: m.Profile, IP: ip, Enrolled: !m.Discovered}
		if ip != nil {
			s.reserved[ip.String()] = s.machines[hw.String()]
		}
	}
	v.cur.Store(s)
	return nil
}

// Machine returns the listed machine with this MAC.
func (v *View) Machine(mac net.HardwareAddr) (Machine, bool) {
	m, ok := v.cur.Load().machines[mac.String()]
	return m, ok
}

// Resolve says what mac boots: its own profile if it is listed with one,
// otherwise the default profile. ok is false when there is nothing to boot.
func (v *View) Resolve(mac net.HardwareAddr) (Target, bool) {
	s := v.cur.Load()
	m, known := s.machines[mac.String()]
	if !known {
		m = Machine{MAC: mac}
	}
	name := m.Profile
	switch {
	case name != "":
	case known && m.Enrolled:
		name = s.defaultProfile
	default:
		name = s.unknownProfile
	}
	p, ok := s.profiles[name]
	if !ok {
		return Target{Machine: m, Known: known}, false
	}
	return Target{Machine: m, Known: known, Profile: name, Spec: p}, true
}

// Profile returns the named profile.
func (v *View) Profile(name string) (config.Profile, bool) {
	p, ok := v.cur.Load().profiles[name]
	return p, ok
}

// Lookup gives DHCP its reservation for mac and whether mac is network-booted.
func (v *View) Lookup(mac net.HardwareAddr) (reserved net.IP, boot bool) {
	t, ok := v.Resolve(mac)
	return t.Machine.IP, ok
}

// ReservedFor returns the MAC that ip is reserved for, or nil.
func (v *View) ReservedFor(ip net.IP) net.HardwareAddr {
	if m, ok := v.cur.Load().reserved[ip.String()]; ok {
		return m.MAC
	}
	return nil
}
