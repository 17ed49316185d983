package machineview

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Machine is a known machine.
type Machine struct {
	MAC     net.HardwareAddr
	Name    string
	Profile string
	IP      net.IP // reserved address, nil if none
	// Channel, when set, is the version of its profile's root image the
	// machine boots instead of the profile's channel.
	Channel string
	// Enrolled is false for a machine that was only discovered: it booted
	// unasked and nobody has set it up yet.
	Enrolled bool
}

// Target is what one machine boots.
type Target struct {
	Machine Machine // MAC always set; Name empty for unlisted machines
	Known   bool    // listed, as opposed to booted through the default profile
	Profile string
	Spec    inventory.Profile
}

// hwKey is a MAC as a map key. DHCP looks machines up for every packet, so
// keys are fixed-size values: no string formatting, no allocation per lookup.
// 20 bytes holds every hardware address net.ParseMAC accepts (InfiniBand).
type hwKey struct {
	n uint8
	b [20]byte
}

func keyOf(mac net.HardwareAddr) (k hwKey, ok bool) {
	if len(mac) > len(k.b) {
		return k, false
	}
	k.n = uint8(len(mac))
	copy(k.b[:], mac)
	return k, true
}

func ipKey(ip net.IP) (k [4]byte, ok bool) {
	ip4 := ip.To4()
	if ip4 == nil {
		return k, false
	}
	return [4]byte(ip4), true
}

// snapshot is immutable once published.
type snapshot struct {
	machines       map[hwKey]Machine
	reserved       map[[4]byte]Machine // key: reserved IPv4 address
	profiles       map[string]inventory.Profile
	defaultProfile string // for listed machines without a profile
	unknownProfile string // for machines nobody enrolled: discovered or never seen
}

// View answers lookups from the current snapshot.
type View struct {
	cur atomic.Pointer[snapshot]
	mu  sync.Mutex // serializes writers; readers only load cur
}

// Input is what a view is built from: the fleet's profiles and machines
// and which profile boots the machines nobody enrolled. A running server
// fills it from the inventory (package inventorysvc).
type Input struct {
	Profiles map[string]inventory.Profile
	Machines []Machine
	// DefaultProfile boots enrolled machines that name no profile.
	DefaultProfile string
	// UnknownProfile boots machines nobody enrolled: discovered ones and
	// ones never seen. Empty boots none of them.
	UnknownProfile string
}

// New builds a view of in.
func New(in Input) (*View, error) {
	v := &View{}
	if err := v.Apply(in); err != nil {
		return nil, err
	}
	return v, nil
}

// Apply replaces the view's contents with in. The view keeps no reference
// to in's maps or slices.
func (v *View) Apply(in Input) error {
	s := &snapshot{
		machines:       make(map[hwKey]Machine, len(in.Machines)),
		reserved:       map[[4]byte]Machine{},
		profiles:       make(map[string]inventory.Profile, len(in.Profiles)),
		defaultProfile: in.DefaultProfile,
		unknownProfile: in.UnknownProfile,
	}
	for name, p := range in.Profiles {
		s.profiles[name] = p
	}
	for i, m := range in.Machines {
		k, ok := keyOf(m.MAC)
		if !ok {
			return fmt.Errorf("machines[%d].mac: %v is longer than 20 bytes", i, m.MAC)
		}
		m.MAC = append(net.HardwareAddr(nil), m.MAC...)
		if m.IP != nil {
			m.IP = append(net.IP(nil), m.IP.To4()...)
		}
		s.machines[k] = m
		if ipk, ok := ipKey(m.IP); ok {
			s.reserved[ipk] = m
		}
	}
	v.mu.Lock()
	v.cur.Store(s)
	v.mu.Unlock()
	return nil
}

// AddDiscovered adds machines that booted unasked (not enrolled, no name,
// no profile) without a reload from the store. MACs already in the view are
// left alone. It copies the snapshot once per call, so callers with many
// new machines should batch them.
func (v *View) AddDiscovered(macs ...net.HardwareAddr) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.cur.Load()
	var added []hwKey
	for _, mac := range macs {
		if k, ok := keyOf(mac); ok {
			if _, known := old.machines[k]; !known {
				added = append(added, k)
			}
		}
	}
	if len(added) == 0 {
		return
	}
	s := *old
	s.machines = make(map[hwKey]Machine, len(old.machines)+len(added))
	for k, m := range old.machines {
		s.machines[k] = m
	}
	for _, k := range added {
		s.machines[k] = Machine{MAC: append(net.HardwareAddr(nil), k.b[:k.n]...)}
	}
	v.cur.Store(&s)
}

// Machine returns the listed machine with this MAC.
func (v *View) Machine(mac net.HardwareAddr) (Machine, bool) {
	k, ok := keyOf(mac)
	if !ok {
		return Machine{}, false
	}
	m, ok := v.cur.Load().machines[k]
	return m, ok
}

// Resolve says what mac boots: its own profile if it is listed with one,
// otherwise the default profile. ok is false when there is nothing to boot.
func (v *View) Resolve(mac net.HardwareAddr) (Target, bool) {
	s := v.cur.Load()
	k, _ := keyOf(mac) // too long: the zero key, which matches no machine
	m, known := s.machines[k]
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
	if m.Channel != "" && p.Root.Image != "" {
		p.Root.Channel = m.Channel // a copy: the profile's own stays
	}
	return Target{Machine: m, Known: known, Profile: name, Spec: p}, true
}

// Profile returns the named profile.
func (v *View) Profile(name string) (inventory.Profile, bool) {
	p, ok := v.cur.Load().profiles[name]
	return p, ok
}

// Lookup gives DHCP its reservation for mac and whether mac is network-booted.
func (v *View) Lookup(mac net.HardwareAddr) (reserved net.IP, boot bool) {
	t, ok := v.Resolve(mac)
	return t.Machine.IP, ok
}

// Enrolled says whether mac is a machine an admin set up (listed in the
// config or enrolled in the inventory), not one discovered by booting or
// never seen: DHCP keeps its reserve of addresses for these.
func (v *View) Enrolled(mac net.HardwareAddr) bool {
	k, ok := keyOf(mac)
	if !ok {
		return false
	}
	m, known := v.cur.Load().machines[k]
	return known && m.Enrolled
}

// ReservedFor returns the MAC that ip is reserved for, or nil.
func (v *View) ReservedFor(ip net.IP) net.HardwareAddr {
	k, ok := ipKey(ip)
	if !ok {
		return nil
	}
	if m, ok := v.cur.Load().reserved[k]; ok {
		return m.MAC
	}
	return nil
}
