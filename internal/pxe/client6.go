package pxe

import (
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Detect6 reads the firmware-identifying options of a DHCPv6 request
// (RFC 5970): option 61 client architecture, option 16 vendor class (its
// data "PXEClient:..." or "HTTPClient:..." as in DHCPv4's option 60,
// whatever the enterprise number) and option 15 user class ("iPXE"). Like
// Detect it never fails; a relayed message should be unwrapped first.
func Detect6(m *dhcpv6.Message) Client {
	c := Client{IPv6: true}
	if m == nil {
		return c
	}
	for _, vc := range m.Options.VendorClasses() {
		for _, d := range vc.Data {
			s := string(d)
			switch {
			case strings.HasPrefix(s, VendorPXE):
				c.PXE, c.VendorClass = true, s
			case strings.HasPrefix(s, VendorHTTP):
				c.HTTPBoot, c.VendorClass = true, s
			}
		}
	}
	if archs := m.Options.ArchTypes(); len(archs) > 0 {
		c.Arch, c.HasArch = Arch(archs[0]), true
	} else if a, ok := archFromVendorClass(c.VendorClass); ok {
		c.Arch, c.HasArch = a, true
	}
	if c.Arch.isHTTP() {
		c.HTTPBoot = true
	}
	for _, uc := range m.Options.UserClasses() {
		if string(uc) == "iPXE" {
			c.IPXE, c.UserClass = true, "iPXE"
		}
	}
	return c
}
