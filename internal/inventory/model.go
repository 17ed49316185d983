package inventory

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
)

// State is where a machine is in its life: discovered (booted once, not
// enrolled), ready (enrolled, waiting for its next boot), booting (DHCP
// seen), booted (its OS called the DoneURL) or failed.
type State string

// Machine states.
const (
	StateDiscovered State = "discovered"
	StateReady      State = "ready"
	StateBooting    State = "booting"
	StateBooted     State = "booted"
	StateFailed     State = "failed"
)

// States lists every valid State, in life-cycle order.
var States = []State{StateDiscovered, StateReady, StateBooting, StateBooted, StateFailed}

// ParseState checks s names a State.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", invalid("state", "want one of discovered, ready, booting, booted, failed; got %q", s)
}

// Source says who owns a record. The config file stays the source for what
// it names: ApplyConfig overwrites config records at every start, so the
// API refuses to change them.
type Source string

// Record sources.
const (
	SourceConfig Source = "config"
	SourceAPI    Source = "api"
)

// Machine is one network-booted computer, keyed by MAC.
type Machine struct {
	MAC     net.HardwareAddr
	Name    string            // optional; unique when set
	Profile string            // empty: the default profile
	Labels  map[string]string // free-form, e.g. room=lab2
	IP      net.IP            // reserved IPv4 address in full DHCP mode; nil for none; unique
	State   State             // default ready (discovered for machines found by booting)
	Source  Source            // default api

	LastBoot    time.Time // start of the latest boot; zero if never
	LastAddress net.IP    // address of the latest boot; nil if never

	// MachineID is the machine's systemd machine-id, which its diskless
	// root gets in /etc/machine-id. The store makes one when the machine
	// is added (empty here: make one) and keeps it through every update
	// and reset (empty in an update: keep it); a machine removed and
	// added again gets a new one.
	MachineID string

	// RootFiles and Vars are the machine's own files: and vars:, set
	// through the API; its vars win over its profile's. A config machine
	// keeps its own in the config, not here.
	RootFiles []RootFile
	Vars      map[string]string

	// Channel is which version of its profile's root image the machine
	// boots, over its profile's channel: "" follows the profile;
	// production, test or a version number (a pin) win over it. A next
	// boot into another profile follows that profile's channel.
	Channel string
}

// Lease is a DHCP lease in full mode: IP belongs to MAC until Expiry.
// Addresses and MACs are each unique across leases.
type Lease struct {
	MAC    net.HardwareAddr
	IP     net.IP
	Expiry time.Time
	// Replaces, on a write, is the expired lease of another MAC on IP
	// that this one takes over. The store deletes it in the same
	// transaction only if it is still as given (that MAC, an expiry no
	// later), and otherwise refuses with a *LeaseTaken: another server
	// may have renewed it since the caller looked. Never stored.
	Replaces *Lease
}

// Event is one thing that happened to a machine, for its timeline.
type Event struct {
	ID      int64 // assigned by the store, increasing
	Time    time.Time
	MAC     net.HardwareAddr
	Kind    string // e.g. dhcp, booted, machine.added; other issues add more
	Details string
}

// MachineFilter selects machines in ListMachines; zero fields match all.
type MachineFilter struct {
	State   State
	Profile string
	Labels  map[string]string // every pair must match
}

// Match reports whether m passes f.
func (f MachineFilter) Match(m Machine) bool {
	if f.State != "" && m.State != f.State {
		return false
	}
	if f.Profile != "" && m.Profile != f.Profile {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := m.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// EventFilter selects events in ListEvents, newest first.
type EventFilter struct {
	MAC   net.HardwareAddr // nil: every machine
	Limit int              // default 100, at most MaxEventLimit
}

// MaxEventLimit caps one ListEvents answer.
const MaxEventLimit = 1000

// ParseMAC accepts an Ethernet MAC as 52:54:00:12:34:56 or 52-54-00-12-34-56.
func ParseMAC(s string) (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return nil, invalid("mac", "want an Ethernet MAC like 52:54:00:12:34:56, got %q", s)
	}
	return hw, nil
}

var (
	pnameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	labelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)
)

// Limits on labels.
const (
	MaxLabels        = 64
	MaxLabelValueLen = 255
)

// Validate checks m and fills defaults (State, Source). It does not check
// that the profile exists; the store does, in the same transaction.
func (m *Machine) Validate() error {
	if len(m.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC, got %q", m.MAC.String())
	}
	if m.Name != "" {
		if why := CheckHostName(m.Name); why != "" {
			return invalid("name", "%q is not a host name (RFC 1123): %s; use letters, digits and inner hyphens, labels of at most 63 separated by dots", m.Name, why)
		}
	}
	if m.Profile != "" && !pnameRE.MatchString(m.Profile) {
		return invalid("profile", "want a profile name (letters, digits, . _ -, at most 63), got %q", m.Profile)
	}
	if err := validateLabels(m.Labels); err != nil {
		return err
	}
	if err := validateRootFiles(m.RootFiles, m.Vars); err != nil {
		return err
	}
	if m.MachineID != "" {
		if why := CheckMachineID(m.MachineID); why != "" {
			return invalid("machine_id", "%s, got %q", why, m.MachineID)
		}
	}
	if m.IP != nil {
		ip4 := m.IP.To4()
		if ip4 == nil {
			return invalid("ip", "want an IPv4 address, got %v", m.IP)
		}
		m.IP = ip4
	}
	if msg := CheckChannel(m.Channel); msg != "" {
		return invalid("root_channel", "%s", msg)
	}
	if m.LastAddress != nil {
		if m.LastAddress.To4() == nil {
			return invalid("last_address", "want an IPv4 address, got %v", m.LastAddress)
		}
		m.LastAddress = m.LastAddress.To4()
	}
	if m.State == "" {
		m.State = StateReady
	}
	if _, err := ParseState(string(m.State)); err != nil {
		return err
	}
	return checkSource(&m.Source)
}

func validateLabels(l map[string]string) error {
	if len(l) > MaxLabels {
		return invalid("labels", "at most %d labels, got %d", MaxLabels, len(l))
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !labelRE.MatchString(k) {
			return invalid("labels", "label key %q: want letters, digits and . _ / - (at most 63)", k)
		}
		v := l[k]
		if len(v) > MaxLabelValueLen || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return invalid("labels", "label %s: value must be at most %d characters without control characters", k, MaxLabelValueLen)
		}
	}
	return nil
}

// Validate checks l.
func (l *Lease) Validate() error {
	if len(l.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC, got %q", l.MAC.String())
	}
	if l.IP.To4() == nil {
		return invalid("ip", "want an IPv4 address, got %v", l.IP)
	}
	l.IP = l.IP.To4()
	if l.Expiry.IsZero() {
		return invalid("expiry", "required")
	}
	return nil
}

// Validate checks e and fills Time when zero.
func (e *Event) Validate(now time.Time) error {
	if len(e.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC, got %q", e.MAC.String())
	}
	if e.Kind == "" || len(e.Kind) > 64 {
		return invalid("kind", "want 1 to 64 characters, got %q", e.Kind)
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	return nil
}

func checkSource(s *Source) error {
	switch *s {
	case "":
		*s = SourceAPI
	case SourceAPI, SourceConfig:
	default:
		return invalid("source", "want config or api, got %q", *s)
	}
	return nil
}

// String names a machine for messages: "pc1 (52:54:00:12:34:56)" or the MAC.
func (m Machine) String() string {
	if m.Name == "" {
		return m.MAC.String()
	}
	return fmt.Sprintf("%s (%s)", m.Name, m.MAC)
}
