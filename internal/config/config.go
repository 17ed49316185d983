package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bootfleet/bootfleet/internal/initramfs"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Config is the whole of bootfleet's configuration file.
type Config struct {
	// Interface is where DHCP listens; its IPv4 address is the server's
	// address unless ServerIP is set. Required unless dhcp.mode is off.
	Interface string `yaml:"interface"`
	// ServerIP overrides the address put in DHCP replies and boot URLs.
	ServerIP string `yaml:"server_ip"`
	// Data is the state directory (leases). Default /var/lib/bootfleet.
	Data string `yaml:"data"`

	DHCP  DHCP  `yaml:"dhcp"`
	DHCP6 DHCP6 `yaml:"dhcp6"`
	TFTP  TFTP  `yaml:"tftp"`
	HTTP  HTTP  `yaml:"http"`
	NBD   NBD   `yaml:"nbd"`
	// Multicast streams diskless roots' base content (multicast.go).
	Multicast Multicast `yaml:"multicast"`
	IPXE      IPXE      `yaml:"ipxe"`
	Log       Log       `yaml:"log"`

	// SecureBoot names the signed binaries that boot profiles with
	// loader: grub. Required only when a profile uses them.
	SecureBoot SecureBoot `yaml:"secure_boot"`

	// DefaultProfile boots machines not listed under Machines (and listed
	// ones without a profile). Empty means they are not network-booted.
	DefaultProfile string `yaml:"default_profile"`
	// Discovery says what happens to a machine nobody enrolled: "boot" (the
	// default) boots it with DiscoveryProfile, or DefaultProfile when that is
	// empty; "ignore" records it as discovered but does not boot it.
	Discovery string `yaml:"discovery"`
	// DiscoveryProfile, if set, is what unenrolled machines boot.
	DiscoveryProfile string `yaml:"discovery_profile"`
	// MaintenanceProfile is what `bootfleet machine next-boot NAME
	// maintenance` boots once: a rescue or reinstall system. Empty
	// refuses that target.
	MaintenanceProfile string `yaml:"maintenance_profile"`
	// Store is the inventory: empty for SQLite in the data directory, a
	// SQLite file path, or a postgres:// DSN shared by several servers.
	Store string `yaml:"store"`
	// Server names this server among those sharing Store.
	Server Server `yaml:"server"`
	// Identity configures machines' identities (SSH host keys' sealing key).
	Identity Identity `yaml:"identity"`
	// Telemetry is on (default: boot records, /metrics, dashboard
	// timelines) or off (only each boot's first DHCP packet and DoneURL
	// are noted, in memory, for the boot complete line; for measuring
	// what the rest costs).
	Telemetry string `yaml:"telemetry"`
	// Boots is the stored boot history's retention.
	Boots Boots `yaml:"boots"`
	API   API   `yaml:"api"`
	// IPv6RA is auto (default) or off. auto answers IPv6 router
	// solicitations on the DHCP interface with a router advertisement that
	// makes us nobody's router (lifetime 0, no prefixes), so iPXE does not
	// wait about 13 s for a router at every boot; it stays silent while
	// another router advertises on the link. Not used with dhcp.mode: off.
	IPv6RA string `yaml:"ipv6_ra"`

	Profiles map[string]Profile `yaml:"profiles"`
	Machines []Machine          `yaml:"machines"`
	// Schedules power machines on, off or reboot them at set times.
	Schedules []Schedule `yaml:"schedules"`
}

// API configures the REST API under /api/v1.
type API struct {
	// OpenReads lets GET requests through without the token. Default false:
	// every call needs `Authorization: Bearer TOKEN` (token file in data/).
	OpenReads bool `yaml:"open_reads"`
}

// DHCP configures the DHCPv4 server.
type DHCP struct {
	// Mode is full (assign addresses), proxy (boot options only, next to the
	// site's DHCP server) or off. Default full.
	Mode string `yaml:"mode"`
	// Range is the pool for full mode, "first-last", e.g. 10.0.0.100-10.0.0.200.
	Range string `yaml:"range"`
	// Lease is the lease time. Default 1h, at least 1m.
	Lease Duration `yaml:"lease"`
	// Router and DNS are optional options sent in full mode.
	Router string   `yaml:"router"`
	DNS    []string `yaml:"dns"`
	// Reserve is how many addresses of the range only enrolled machines
	// may take, so a flood of DISCOVERs from random MACs cannot leave the
	// lab's machines without one. Default 0: a tenth of the range; -1: none.
	Reserve int `yaml:"reserve"`
	// CoverAfter matters when several servers answer DHCP on one LAN
	// from one PostgreSQL store: each answers only its share of the
	// clients, and a client whose secs field shows it has tried this
	// long gets an answer from another server too. Default 3s; 1s to 1m.
	CoverAfter Duration `yaml:"cover_after"`
}

// TFTP configures the TFTP server.
type TFTP struct {
	// Listen is the UDP address. Default ":69". "off" disables TFTP.
	Listen string `yaml:"listen"`
	// Root is an optional directory of extra files, served read-only over
	// TFTP and HTTP (/files/...).
	Root string `yaml:"root"`
	// MaxWindow caps the RFC 7440 windowsize granted. Default 64, 1..65535.
	MaxWindow int `yaml:"max_window"`
	// AllowFragmentation lets blksize exceed the interface MTU. Default false:
	// with windows, lost IP fragments make transfers collapse.
	AllowFragmentation bool `yaml:"allow_fragmentation"`
	// DisableGSO sends each TFTP packet as its own datagram (still batched
	// with sendmmsg) instead of using UDP segmentation offload. Default false.
	DisableGSO bool `yaml:"disable_gso"`
	// CacheMB bounds the shared in-memory file cache, which holds a file
	// from its second fetch on. Default 512; 0 keeps the default, -1 disables.
	CacheMB int `yaml:"cache_mb"`
	// MaxTransfers bounds the transfers running at once, MaxPerClient
	// those of one client address; requests beyond are dropped and the
	// client repeats them. Defaults 1024 (1..65535) and 8 (1..1024).
	MaxTransfers int `yaml:"max_transfers"`
	MaxPerClient int `yaml:"max_per_client"`
	// Multicast, set to an IPv4 multicast prefix such as
	// "239.255.69.0/24", serves RFC 2090 multicast TFTP from groups in it
	// to clients that ask, and makes iPXE scripts fetch profiles' local
	// kernels and initrds with tftm:// first, HTTP after it if that fails.
	// Default "" (off); see the README for what it gave when measured.
	Multicast string `yaml:"multicast"`
}

// HTTP configures the HTTP boot server.
type HTTP struct {
	// Listen is the TCP address. Default ":8080".
	Listen string `yaml:"listen"`
	// TLS, when set, serves the API and dashboard over HTTPS instead (see
	// tls.go). Default: none, everything on Listen.
	TLS *TLS `yaml:"tls"`
}

// NBD configures the NBD server that serves diskless roots (profiles with
// a root).
type NBD struct {
	// Listen is the TCP address. Default ":10809" (IANA's NBD port). "off"
	// disables it; profiles with a root then cannot boot.
	Listen string `yaml:"listen"`
	// Agent is the static bootfleet-agent binary that goes into the
	// initramfs bootfleet builds for profiles with root.kernel: image.
	// Default: the bootfleet-agent file next to the bootfleet binary.
	Agent string `yaml:"agent"`
	// NICDrivers are the NIC drivers of that initramfs, as `bootfleet
	// initramfs build --nic-drivers` takes them: names, "default" for
	// initramfs.DefaultNICDrivers, or "none". Default: the default list.
	NICDrivers []string `yaml:"nic_drivers"`
	// MergeDepth is how many layers deep an image version may be stored
	// (each update stores only its differences, over the version it came
	// from) before the server merges it into a whole file in the
	// background. Default 5; -1 never merges by itself (bootfleet image
	// merge still does). Range -1 to 32.
	MergeDepth int `yaml:"merge_depth"`
}

// IPXE says where the iPXE binaries are and which ones to chainload.
type IPXE struct {
	// Dir holds Debian's ipxe package binaries. Default /usr/lib/ipxe.
	Dir string `yaml:"dir"`
	// EFIBinary is chainloaded by UEFI x64 firmware: ipxe.efi (default) or snponly.efi.
	EFIBinary string `yaml:"efi_binary"`
	// BIOSBinary is chainloaded by BIOS PXE ROMs. Default undionly.kpxe.
	BIOSBinary string `yaml:"bios_binary"`
	// EFIARM64Binary, a file in Dir, is chainloaded by ARM64 UEFI
	// firmware. Default none: Debian's ipxe package (amd64) has no ARM64
	// build, so ARM64 machines get no boot file until one is supplied
	// (ipxe.org's arm64 snp.efi, or `make bin-arm64-efi/snp.efi`).
	EFIARM64Binary string `yaml:"efi_arm64_binary"`
}

// Log configures logging.
type Log struct {
	// Format is text (default) or json.
	Format string `yaml:"format"`
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
}

// Machine is a known machine. IP, if set, is reserved for it in full mode.
type Machine struct {
	MAC     string `yaml:"mac"`
	Name    string `yaml:"name"`
	Profile string `yaml:"profile"`
	IP      string `yaml:"ip"`
	// RootChannel is which version of its profile's root image the
	// machine boots, over the profile's root.channel: production, test or
	// a version number to pin; empty follows the profile.
	RootChannel string `yaml:"root_channel"`
	// Vars and Files are the machine's own: its vars win over its
	// profile's, its files replace the profile's of the same path.
	Vars  map[string]string `yaml:"vars"`
	Files []File            `yaml:"files"`
	Power *MachinePower     `yaml:"power"`
}

// Duration is a time.Duration written as "1h", "30m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: want a duration like 1h or 30m, got %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML, rejects unknown keys, applies defaults and validates.
func Parse(r io.Reader) (*Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Data, "/var/lib/bootfleet")
	def(&c.Identity.KeyFile, filepath.Join(c.Data, "identity.key"))
	def(&c.DHCP.Mode, "full")
	if c.DHCP.Lease == 0 {
		c.DHCP.Lease = Duration(time.Hour)
	}
	def(&c.DHCP6.Mode, "off")
	if c.DHCP6.Lease == 0 {
		c.DHCP6.Lease = Duration(time.Hour)
	}
	def(&c.TFTP.Listen, ":69")
	if c.TFTP.MaxWindow == 0 {
		c.TFTP.MaxWindow = 64
	}
	if c.TFTP.MaxTransfers == 0 {
		c.TFTP.MaxTransfers = 1024
	}
	if c.TFTP.MaxPerClient == 0 {
		c.TFTP.MaxPerClient = 8
	}
	if c.TFTP.CacheMB == 0 {
		c.TFTP.CacheMB = 512
	}
	def(&c.HTTP.Listen, ":8080")
	c.HTTP.TLS.applyDefaults()
	def(&c.NBD.Listen, ":10809")
	c.Multicast.applyDefaults()
	for name, p := range c.Profiles {
		if p.Root.Image != "" && p.Root.Overlay == "" {
			p.Root.Overlay = inventory.OverlayEphemeral
			c.Profiles[name] = p
		}
	}
	def(&c.IPXE.Dir, "/usr/lib/ipxe")
	def(&c.IPXE.EFIBinary, "ipxe.efi")
	def(&c.IPXE.BIOSBinary, "undionly.kpxe")
	def(&c.Log.Format, "text")
	def(&c.Log.Level, "info")
	def(&c.Discovery, "boot")
	def(&c.Telemetry, "on")
	c.Boots.applyDefaults()
	def(&c.IPv6RA, "auto")
}

// Validate checks every key and returns all problems at once, each naming
// the key and what to write instead.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch c.DHCP.Mode {
	case "full":
		if _, _, err := c.DHCP.ParseRange(); err != nil {
			bad("dhcp.range", "%v", err)
		}
		if c.DHCP.Router != "" && parseIPv4(c.DHCP.Router) == nil {
			bad("dhcp.router", "want an IPv4 address, got %q", c.DHCP.Router)
		}
		for i, d := range c.DHCP.DNS {
			if parseIPv4(d) == nil {
				bad(fmt.Sprintf("dhcp.dns[%d]", i), "want an IPv4 address, got %q", d)
			}
		}
	case "proxy", "off":
		if c.DHCP.Range != "" {
			bad("dhcp.range", "only used in full mode; remove it or set dhcp.mode: full")
		}
	default:
		bad("dhcp.mode", "want full, proxy or off, got %q", c.DHCP.Mode)
	}
	switch c.DHCP6.Mode {
	case "full":
		if _, _, err := c.DHCP6.ParseRange(); err != nil {
			bad("dhcp6.range", "%v", err)
		}
		if time.Duration(c.DHCP6.Lease) < time.Minute {
			bad("dhcp6.lease", "want at least 1m, got %v", time.Duration(c.DHCP6.Lease))
		}
		if c.IPv6RA == "off" {
			bad("ipv6_ra", "dhcp6.mode full needs router advertisements (iPXE starts DHCPv6 only when one says so); set ipv6_ra: auto")
		}
	case "proxy", "off":
		if c.DHCP6.Range != "" {
			bad("dhcp6.range", "only used with dhcp6.mode: full (in proxy mode the site's DHCPv6 server hands out addresses); remove it or set dhcp6.mode: full")
		}
	default:
		bad("dhcp6.mode", "want full, proxy or off, got %q", c.DHCP6.Mode)
	}
	if (c.DHCP.Mode != "off" || c.DHCP6.Mode != "off") && c.Interface == "" {
		bad("interface", "required: the network interface DHCP listens on (e.g. br0)")
	}
	if time.Duration(c.DHCP.Lease) < time.Minute {
		bad("dhcp.lease", "want at least 1m, got %v", time.Duration(c.DHCP.Lease))
	}
	if c.DHCP.Reserve < -1 {
		bad("dhcp.reserve", "want -1 (none), 0 (a tenth of the range) or a number of addresses, got %d", c.DHCP.Reserve)
	}
	if d := time.Duration(c.DHCP.CoverAfter); d != 0 && (d < time.Second || d > time.Minute) {
		bad("dhcp.cover_after", "want 1s to 1m (default 3s), got %v", d)
	}
	if c.ServerIP != "" {
		switch ip := net.ParseIP(c.ServerIP); {
		case ip == nil:
			bad("server_ip", "want an IPv4 or IPv6 address, got %q", c.ServerIP)
		case ip.To4() == nil && c.DHCP.Mode != "off":
			bad("server_ip", "an IPv6 server_ip needs dhcp.mode: off (an IPv6-only network); on a dual-stack one set the IPv4 address, and dhcp6 finds the interface's IPv6 one")
		case ip.To4() == nil && ip.IsLinkLocalUnicast():
			bad("server_ip", "%s is link-local; boot URLs need a global or unique-local address", c.ServerIP)
		}
	}
	if c.TFTP.MaxWindow < 1 || c.TFTP.MaxWindow > 65535 {
		bad("tftp.max_window", "want 1..65535, got %d", c.TFTP.MaxWindow)
	}
	if c.TFTP.MaxTransfers < 1 || c.TFTP.MaxTransfers > 65535 {
		bad("tftp.max_transfers", "want 1..65535, got %d", c.TFTP.MaxTransfers)
	}
	if c.TFTP.MaxPerClient < 1 || c.TFTP.MaxPerClient > 1024 {
		bad("tftp.max_per_client", "want 1..1024, got %d", c.TFTP.MaxPerClient)
	}
	if c.NBD.MergeDepth < -1 || c.NBD.MergeDepth > 32 {
		bad("nbd.merge_depth", "want -1 (never), 0 (default 5) or 1..32 layers, got %d", c.NBD.MergeDepth)
	}
	if _, err := initramfs.ParseNICDrivers(c.NBD.NICDrivers); err != nil {
		bad("nbd.nic_drivers", "%v", err)
	}
	if m := c.TFTP.Multicast; m != "" {
		if pfx, err := netip.ParsePrefix(m); err != nil || !pfx.Addr().Is4() || !pfx.Addr().IsMulticast() || pfx.Bits() < 4 {
			bad("tftp.multicast", "want an IPv4 multicast prefix such as 239.255.69.0/24, or empty for off, got %q", m)
		}
	}
	if c.TFTP.CacheMB < -1 {
		bad("tftp.cache_mb", "want -1 (off) or a size in MiB, got %d", c.TFTP.CacheMB)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	c.validateProfiles(bad)
	if c.DefaultProfile != "" {
		if _, ok := c.Profiles[c.DefaultProfile]; !ok {
			bad("default_profile", "no profile named %q under profiles", c.DefaultProfile)
		}
	}
	if c.DiscoveryProfile != "" {
		if _, ok := c.Profiles[c.DiscoveryProfile]; !ok {
			bad("discovery_profile", "no profile named %q under profiles", c.DiscoveryProfile)
		}
	}
	switch c.Telemetry {
	case "on", "off":
	default:
		bad("telemetry", "want on or off, got %q", c.Telemetry)
	}
	c.Boots.validate(bad)
	c.Server.validate(bad)
	switch c.IPv6RA {
	case "auto", "off":
	default:
		bad("ipv6_ra", "want auto (answer IPv6 router solicitations while no router is on the link) or off, got %q", c.IPv6RA)
	}
	switch c.Discovery {
	case "boot", "ignore":
	default:
		bad("discovery", "want boot or ignore, got %q", c.Discovery)
	}
	seenMAC := map[string]int{}
	seenIP := map[string]int{}
	for i, m := range c.Machines {
		key := fmt.Sprintf("machines[%d]", i)
		hw, err := net.ParseMAC(m.MAC)
		if err != nil || len(hw) != 6 {
			bad(key+".mac", "want an Ethernet MAC like 52:54:00:12:34:56, got %q", m.MAC)
		} else {
			if j, dup := seenMAC[hw.String()]; dup {
				bad(key+".mac", "%s is already listed at machines[%d]", hw, j)
			}
			seenMAC[hw.String()] = i
		}
		if m.Name != "" {
			if why := inventory.CheckHostName(m.Name); why != "" {
				bad(key+".name", "%q is not a host name (RFC 1123): %s", m.Name, why)
			}
		}
		validateFiles(key, m.Files, m.Vars, bad)
		if m.Profile != "" {
			if _, ok := c.Profiles[m.Profile]; !ok {
				bad(key+".profile", "no profile named %q under profiles", m.Profile)
			}
		}
		if msg := inventory.CheckChannel(m.RootChannel); msg != "" {
			bad(key+".root_channel", "%s", msg)
		}
		if m.IP != "" {
			ip := parseIPv4(m.IP)
			switch {
			case ip == nil:
				bad(key+".ip", "want an IPv4 address, got %q", m.IP)
			case c.DHCP.Mode != "full":
				bad(key+".ip", "reservations need dhcp.mode: full")
			default:
				if j, dup := seenIP[ip.String()]; dup {
					bad(key+".ip", "%s is already reserved for machines[%d]", ip, j)
				}
				seenIP[ip.String()] = i
			}
		}
	}
	c.HTTP.validateTLS(bad)
	c.validateSchedules(bad)
	c.Multicast.validate(bad)
	return errors.Join(errs...)
}

// ParseRange returns the first and last address of dhcp.range.
func (d DHCP) ParseRange() (first, last net.IP, err error) {
	a, b, ok := strings.Cut(d.Range, "-")
	if !ok {
		return nil, nil, fmt.Errorf("want first-last, e.g. 10.0.0.100-10.0.0.200, got %q", d.Range)
	}
	first, last = parseIPv4(strings.TrimSpace(a)), parseIPv4(strings.TrimSpace(b))
	if first == nil || last == nil {
		return nil, nil, fmt.Errorf("want two IPv4 addresses, got %q", d.Range)
	}
	if bytes.Compare(first, last) > 0 {
		return nil, nil, fmt.Errorf("first address %s is after last %s", first, last)
	}
	return first, last, nil
}

func parseIPv4(s string) net.IP {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil
	}
	return ip.To4()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
