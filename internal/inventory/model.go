package inventory

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/bootfleet/bootfleet/internal/config"
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
}

// Profile is what a machine boots. Kernel and Initrd are local paths or
// http(s) URLs; Cmdline is a template rendered per machine by package ipxe.
type Profile struct {
	Name    string
	Kernel  string
	Initrd  []string
	Cmdline string
	// Root is the machine's diskless root, if Root.Image is set.
	Root Root
	// Loader is what UEFI x64 firmware loads: empty or ipxe for iPXE,
	// grub for the signed shim and grub (config.LoaderGrub).
	Loader string
	Source Source // default api
}

// Root is a profile's diskless root, as the config file's root: says it.
type Root struct {
	// Image names an Image to serve as the machine's root over NBD; empty
	// for none.
	Image string
	// Overlay is ephemeral (the default when Image is set), persistent,
	// none, client-ram or client-disk (config.OverlayModes).
	Overlay string
	// Kernel is empty to boot the profile's Kernel and Initrd, or image
	// (config.RootKernelImage) to boot the kernel Image holds, with an
	// initramfs built from it; Kernel and Initrd are then empty.
	Kernel string
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
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
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
	if m.Name != "" && !nameRE.MatchString(m.Name) {
		return invalid("name", "want a host name (letters, digits, inner hyphens, at most 63), got %q", m.Name)
	}
	if m.Profile != "" && !pnameRE.MatchString(m.Profile) {
		return invalid("profile", "want a profile name (letters, digits, . _ -, at most 63), got %q", m.Profile)
	}
	if err := validateLabels(m.Labels); err != nil {
		return err
	}
	if m.IP != nil {
		ip4 := m.IP.To4()
		if ip4 == nil {
			return invalid("ip", "want an IPv4 address, got %v", m.IP)
		}
		m.IP = ip4
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

// Validate checks p and fills defaults (Source).
func (p *Profile) Validate() error {
	if !pnameRE.MatchString(p.Name) {
		return invalid("name", "want a profile name (letters, digits, . _ -, at most 63), got %q", p.Name)
	}
	if err := p.validateKernel(); err != nil {
		return err
	}
	if strings.ContainsAny(p.Cmdline, "\r\n") {
		return invalid("cmdline", "must be one line")
	}
	if p.Loader != "" && p.Loader != config.LoaderIPXE && p.Loader != config.LoaderGrub {
		return invalid("loader", "want ipxe (default) or grub (Secure Boot through the server's signed shim and grub), got %q", p.Loader)
	}
	switch {
	case p.Root.Image == "" && p.Root.Overlay != "":
		return invalid("root_image", "required when overlay is set: the name of an imported image")
	case p.Root.Image == "":
	case !pnameRE.MatchString(p.Root.Image):
		return invalid("root_image", "want an image name (letters, digits, . _ -, at most 63), got %q", p.Root.Image)
	case p.Root.Overlay == "":
		p.Root.Overlay = "ephemeral"
	case config.CheckOverlay(p.Root.Overlay, p.Cmdline) != "":
		return invalid("overlay", "%s", config.CheckOverlay(p.Root.Overlay, p.Cmdline))
	}
	return checkSource(&p.Source)
}

// validateKernel checks where the kernel comes from: Kernel and Initrd,
// or the root image (Root.Kernel image).
func (p *Profile) validateKernel() error {
	switch p.Root.Kernel {
	case "":
	case config.RootKernelImage:
		switch {
		case p.Root.Image == "":
			return invalid("root_image", "required when root_kernel is image: the name of an imported image whose kernel boots")
		case p.Kernel != "":
			return invalid("kernel", "must be empty when root_kernel is image (the kernel comes from the root image); remove it, or remove root_kernel to boot it")
		case len(p.Initrd) > 0:
			return invalid("initrd", "must be empty when root_kernel is image (the initramfs is built from the root image); remove them, or remove root_kernel to boot them")
		}
		return nil
	default:
		return invalid("root_kernel", "want image (boot the kernel in the root image) or empty (boot kernel and initrd), got %q", p.Root.Kernel)
	}
	if strings.TrimSpace(p.Kernel) == "" {
		return invalid("kernel", "required: a local path or http(s) URL of the kernel (or root_kernel image with a root_image)")
	}
	for i, rd := range p.Initrd {
		if strings.TrimSpace(rd) == "" {
			return invalid("initrd", "entry %d is empty; remove it or give a path or URL", i)
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
