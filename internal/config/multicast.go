package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/internal/mcastgroup"
)

// Multicast configures how diskless roots' shared base content is sent:
// once by multicast to every machine booting it, each asking for the
// chunks it needs, rather than once per machine by unicast.
type Multicast struct {
	// Mode is auto (default: profiles with a diskless root stream their
	// base by multicast on the server's interface) or off (every machine
	// reads its root by unicast NBD, as before).
	Mode string `yaml:"mode"`
	// Rate is the most the multicast sends, in bits per second on the
	// wire: a share of the interface's link speed ("50%", the default) or
	// bits with a k, M or G suffix ("400M"). At least 1M; a rate above the
	// link speed is refused. Where the driver reports no speed (a bridge)
	// a share is of 1 Gbit/s; a veth reports 10 Gbit/s, so behind one
	// give bits for the link that is really the bottleneck.
	Rate string `yaml:"rate"`
	// Group is the block each content's group is drawn from, one group per
	// content (internal/mcastgroup): a prefix or one address. Default
	// 239.0.0.0/8, the administratively scoped block; one outside it is
	// refused unless AllowGlobalGroups.
	Group string `yaml:"group"`
	// AllowGlobalGroups allows a Group outside 239.0.0.0/8, which may
	// collide with a service someone else runs. Default false.
	AllowGlobalGroups bool `yaml:"allow_global_groups"`
	// Port is the UDP port of the groups and of the server's request
	// socket. Default 10810.
	Port int `yaml:"port"`
	// TTL is the multicast TTL. Default 1: a storm stays on its segment.
	TTL int `yaml:"ttl"`
	// MTFTP is auto (default: where Mode is auto and TFTP is on, scripts
	// of diskless profiles fetch the kernel by iPXE's mtftp:// first, the
	// group carrying one kernel at a time; package mtftp) or off.
	MTFTP string `yaml:"mtftp"`
	// MTFTPPort is where iPXE sends MTFTP requests. Default 1759, iPXE's.
	MTFTPPort int `yaml:"mtftp_port"`
	// MTFTPGroup is the group and port of MTFTP DATA. Default
	// 239.255.1.1:3001, the only one iPXE listens on (built in); in
	// 239.0.0.0/8 unless AllowGlobalGroups.
	MTFTPGroup string `yaml:"mtftp_group"`
	// UKIStub is systemd-stub, from which the server builds a unified
	// kernel image (kernel and initrds in one EFI file, package ukicache)
	// that UEFI machines of x86_64 diskless profiles fetch by mtftp:// in
	// place of the kernel. Default
	// /usr/lib/systemd/boot/efi/linuxx64.efi.stub (Debian's
	// systemd-boot-efi); when the file is missing, the kernel alone goes
	// by MTFTP.
	UKIStub string `yaml:"uki_stub"`
}

// DefaultMTFTPGroup is where every iPXE listens for mtftp:// DATA.
const DefaultMTFTPGroup = "239.255.1.1:3001"

// DefaultUKIStub is where Debian's systemd-boot-efi puts the x86_64 stub.
const DefaultUKIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// MTFTPOn says whether kernels go by PXE MTFTP; the server also needs
// TFTP on (iPXE falls back to it) and an IPv4 address.
func (m Multicast) MTFTPOn() bool { return m.MTFTP == "auto" && m.Mode == "auto" }

// MTFTPGroupAddr is MTFTPGroup parsed; validation has refused a bad one.
func (m Multicast) MTFTPGroupAddr() (netip.AddrPort, error) {
	g, err := netip.ParseAddrPort(m.MTFTPGroup)
	if err != nil || !g.Addr().Is4() || !g.Addr().IsMulticast() || g.Port() == 0 {
		return g, fmt.Errorf("want an IPv4 multicast group and port like %s, got %q", DefaultMTFTPGroup, m.MTFTPGroup)
	}
	if !m.AllowGlobalGroups && !adminScoped.Contains(g.Addr()) {
		return g, fmt.Errorf("%s is outside %v, the administratively scoped block; set allow_global_groups: true to use it anyway", g.Addr(), adminScoped)
	}
	return g, nil
}

var adminScoped = netip.MustParsePrefix("239.0.0.0/8")

// DefaultLinkBits is the link speed a rate share is taken of when the
// interface reports none.
const DefaultLinkBits = 1_000_000_000

func (m *Multicast) applyDefaults() {
	if m.Mode == "" {
		m.Mode = "auto"
	}
	if m.Rate == "" {
		m.Rate = "50%"
	}
	if m.Port == 0 {
		m.Port = 10810
	}
	if m.TTL == 0 {
		m.TTL = 1
	}
	if m.MTFTP == "" {
		m.MTFTP = "auto"
	}
	if m.MTFTPPort == 0 {
		m.MTFTPPort = 1759
	}
	if m.MTFTPGroup == "" {
		m.MTFTPGroup = DefaultMTFTPGroup
	}
	if m.UKIStub == "" {
		m.UKIStub = DefaultUKIStub
	}
}

func (m Multicast) validate(bad func(key, format string, args ...any)) {
	switch m.Mode {
	case "auto", "off":
	default:
		bad("multicast.mode", "want auto (multicast every diskless root's base) or off, got %q", m.Mode)
	}
	if _, err := m.Space(); err != nil {
		bad("multicast.group", "%v", err)
	}
	if _, _, err := parseRate(m.Rate); err != nil {
		bad("multicast.rate", "%v", err)
	}
	if m.Port < 1 || m.Port > 65535 {
		bad("multicast.port", "want 1..65535 (default 10810), got %d", m.Port)
	}
	if m.TTL < 1 || m.TTL > 255 {
		bad("multicast.ttl", "want 1..255 (default 1), got %d", m.TTL)
	}
	switch m.MTFTP {
	case "auto", "off":
	default:
		bad("multicast.mtftp", "want auto (kernels of diskless profiles by mtftp:// first) or off, got %q", m.MTFTP)
	}
	if m.MTFTPPort < 1 || m.MTFTPPort > 65535 || m.MTFTPPort == m.Port {
		bad("multicast.mtftp_port", "want 1..65535 (default 1759), not multicast.port %d, got %d", m.Port, m.MTFTPPort)
	}
	if _, err := m.MTFTPGroupAddr(); err != nil {
		bad("multicast.mtftp_group", "%v", err)
	}
}

// Space is the block groups are drawn from.
func (m Multicast) Space() (mcastgroup.Space, error) {
	s, err := mcastgroup.ParseSpace(m.Group, m.AllowGlobalGroups)
	if err != nil {
		return s, fmt.Errorf("%w (set allow_global_groups: true to use it anyway)", err)
	}
	return s, nil
}

// BytesPerSecond is Rate in bytes per second for a link of linkBits bits
// per second (0: unknown, DefaultLinkBits for a share); it refuses a
// rate above the link speed.
func (m Multicast) BytesPerSecond(linkBits int64) (int64, error) {
	bits, pct, err := parseRate(m.Rate)
	if err != nil {
		return 0, fmt.Errorf("multicast.rate: %w", err)
	}
	link := linkBits
	if link <= 0 {
		link = DefaultLinkBits
	}
	if pct > 0 {
		bits = link / 100 * int64(pct)
	}
	if linkBits > 0 && bits > linkBits {
		return 0, fmt.Errorf("multicast.rate: %s is %d bit/s, above the interface's link speed of %d bit/s; lower it, or give a share like 50%%", m.Rate, bits, linkBits)
	}
	return bits / 8, nil
}

// parseRate reads "50%" (1..100) or bits per second with an optional k,
// M or G suffix (powers of 1000), at least 1M.
func parseRate(s string) (bits int64, percent int, err error) {
	bad := fmt.Errorf("want a share of the link like 50%% or bits per second like 400M or 1G, at least 1M, got %q", s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return 0, 0, bad
		}
		return 0, n, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult = 1_000
	case strings.HasSuffix(s, "M"):
		mult = 1_000_000
	case strings.HasSuffix(s, "G"):
		mult = 1_000_000_000
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1_000_000_000_000/mult || n*mult < 1_000_000 {
		return 0, 0, bad
	}
	return n * mult, 0, nil
}
