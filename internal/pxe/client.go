package pxe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Arch is a client system architecture type from DHCP option 93
// (RFC 4578 section 2.1, IANA "Processor Architecture Types").
type Arch uint16

// Architectures bootfleet knows how to boot or must recognise to refuse.
const (
	ArchBIOS         Arch = 0  // x86 BIOS (legacy PXE, also iPXE on BIOS)
	ArchEFIIA32      Arch = 6  // x86 UEFI, 32-bit
	ArchEFIx64       Arch = 7  // x86-64 UEFI
	ArchEFIBC        Arch = 9  // EFI byte code; x86-64 firmware sends it by mistake, so it is treated as x64
	ArchEFIARM32     Arch = 10 // ARM 32-bit UEFI
	ArchEFIARM64     Arch = 11 // ARM 64-bit UEFI
	ArchEFIIA32HTTP  Arch = 15 // x86 UEFI HTTP boot
	ArchEFIx64HTTP   Arch = 16 // x86-64 UEFI HTTP boot
	ArchEFIARM64HTTP Arch = 19 // ARM 64-bit UEFI HTTP boot
)

var archNames = map[Arch]string{
	ArchBIOS:         "bios",
	ArchEFIIA32:      "uefi-ia32",
	ArchEFIx64:       "uefi-x64",
	ArchEFIBC:        "uefi-bc",
	ArchEFIARM32:     "uefi-arm32",
	ArchEFIARM64:     "uefi-arm64",
	ArchEFIIA32HTTP:  "uefi-ia32-http",
	ArchEFIx64HTTP:   "uefi-x64-http",
	ArchEFIARM64HTTP: "uefi-arm64-http",
}

// String returns a short lowercase name such as "uefi-x64", or "arch-N" for
// codes bootfleet has no use for.
func (a Arch) String() string {
	if n, ok := archNames[a]; ok {
		return n
	}
	return "arch-" + strconv.Itoa(int(a))
}

// isHTTP reports whether the architecture code itself announces UEFI HTTP boot.
func (a Arch) isHTTP() bool {
	return a == ArchEFIIA32HTTP || a == ArchEFIx64HTTP || a == ArchEFIARM64HTTP
}

// Vendor class (option 60) prefixes that mark a boot client.
const (
	VendorPXE  = "PXEClient"  // PXE 2.1 firmware, and iPXE
	VendorHTTP = "HTTPClient" // UEFI HTTP boot (UEFI 2.5+ section 24.7)
)

// OptionIPXEEncap is iPXE's encapsulated options (option 175). Only iPXE
// sends it, so its presence identifies iPXE even when option 77 is missing.
const OptionIPXEEncap = 175

// IPXENoPXEDHCP is the option 175 sub-option (iPXE's DHCP_EB_NO_PXEDHCP,
// dnsmasq's "dhcp-option=175,176,1b") that, set to 1 in the DHCPOFFER iPXE
// selects, tells iPXE not to wait for ProxyDHCP offers. Without it iPXE
// waits up to its ProxyDHCP timeout (about 2-3 s per boot) for offers that
// never come when one server does both address and boot file.
const IPXENoPXEDHCP = 176

// Client is what a DHCP request says about the firmware that sent it.
// The zero value is a plain DHCP client (an OS), not a boot client.
type Client struct {
	Arch        Arch   // option 93, else the Arch field of a PXEClient vendor class; ArchBIOS when neither says
	HasArch     bool   // false when Arch was guessed because the client sent no architecture
	PXE         bool   // option 60 starts with "PXEClient"
	HTTPBoot    bool   // option 60 starts with "HTTPClient", or option 93 is an HTTP boot architecture
	IPXE        bool   // option 77 holds "iPXE" or option 175 is present
	VendorClass string // option 60 as sent, for logs
	UserClass   string // option 77 as sent (printable form), for logs
	IPv6        bool   // the request was DHCPv6 (Detect6)
}

// Boot reports whether the client is network-boot firmware (PXE, UEFI HTTP
// boot or iPXE) rather than an operating system's DHCP client.
func (c Client) Boot() bool { return c.PXE || c.HTTPBoot || c.IPXE }

// Firmware names the client for log lines: "uefi-x64", "ipxe-bios",
// "uefi-x64-http", "uefi-x64-http-v6" over DHCPv6, or "os" for a client
// that is not booting from the network.
func (c Client) Firmware() string {
	var f string
	switch {
	case c.IPXE:
		f = "ipxe-" + c.Arch.String()
	case c.HTTPBoot && !c.Arch.isHTTP():
		f = c.Arch.String() + "-http"
	case c.Boot():
		f = c.Arch.String()
	default:
		return "os"
	}
	if c.IPv6 {
		f += "-v6"
	}
	return f
}

// Firmware paths as boot records name them: the way the client is
// loading its next stage.
const (
	PathPXEv4  = "PXEv4"  // PXE firmware (BIOS or UEFI), next stage over TFTP
	PathPXEv6  = "PXEv6"  // UEFI PXE over IPv6 (DHCPv6, TFTP over IPv6)
	PathHTTPv4 = "HTTPv4" // UEFI HTTP boot, next stage over HTTP
	PathHTTPv6 = "HTTPv6" // UEFI HTTP boot over IPv6
	PathIPXE   = "iPXE"   // iPXE, fetching its script
)

// Path names the firmware path the client is on: [PathIPXE],
// [PathHTTPv4] or [PathHTTPv6], [PathPXEv4] or [PathPXEv6]; "" for a
// client that is not booting from the network.
func (c Client) Path() string {
	switch {
	case c.IPXE:
		return PathIPXE
	case c.HTTPBoot && c.IPv6:
		return PathHTTPv6
	case c.HTTPBoot:
		return PathHTTPv4
	case c.PXE && c.IPv6:
		return PathPXEv6
	case c.PXE:
		return PathPXEv4
	}
	return ""
}

// Detect reads the firmware-identifying options of a DHCP request.
// It never fails: missing or malformed options simply leave fields unset.
func Detect(m *dhcpv4.DHCPv4) Client {
	var c Client
	if m == nil {
		return c
	}
	c.VendorClass = string(m.Options.Get(dhcpv4.OptionClassIdentifier))
	c.PXE = strings.HasPrefix(c.VendorClass, VendorPXE)
	c.HTTPBoot = strings.HasPrefix(c.VendorClass, VendorHTTP)

	// Option 93 is a list of 16-bit codes (RFC 4578); the first is the
	// architecture the firmware is running, which is the one to boot.
	if a := m.Options.Get(dhcpv4.OptionClientSystemArchitectureType); len(a) >= 2 {
		c.Arch, c.HasArch = Arch(binary.BigEndian.Uint16(a)), true
	} else if a, ok := archFromVendorClass(c.VendorClass); ok {
		c.Arch, c.HasArch = a, true
	}
	if c.Arch.isHTTP() {
		c.HTTPBoot = true
	}

	uc := m.Options.Get(dhcpv4.OptionUserClassInformation)
	c.UserClass = printable(uc)
	c.IPXE = isIPXEUserClass(uc) || m.Options.Has(dhcpv4.GenericOptionCode(OptionIPXEEncap))
	return c
}

// archFromVendorClass parses "PXEClient:Arch:00007:UNDI:003016" (PXE 2.1
// section 2.2.5, also used with "HTTPClient"), for clients that omit option 93.
func archFromVendorClass(vc string) (Arch, bool) {
	parts := strings.Split(vc, ":")
	if len(parts) < 3 || parts[1] != "Arch" {
		return 0, false
	}
	n, err := strconv.ParseUint(parts[2], 10, 16)
	if err != nil {
		return 0, false
	}
	return Arch(n), true
}

// isIPXEUserClass accepts both encodings seen in the field: iPXE's raw
// "iPXE" string, and an RFC 3004 list (length-prefixed strings) containing it.
func isIPXEUserClass(uc []byte) bool {
	if len(uc) == 0 {
		return false
	}
	if bytes.Equal(uc, []byte("iPXE")) {
		return true
	}
	for len(uc) > 0 {
		n := int(uc[0])
		if n == 0 || 1+n > len(uc) {
			return false
		}
		if string(uc[1:1+n]) == "iPXE" {
			return true
		}
		uc = uc[1+n:]
	}
	return false
}

// printable keeps log lines readable whatever bytes a client sends.
func printable(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("%q", b)
		}
	}
	return string(b)
}
