package storm

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Firmware is what an emulated machine plays.
type Firmware string

// Firmware an emulated machine can play.
const (
	FirmwareUEFI Firmware = "uefi" // OVMF / EDK II network stack, x86-64
	FirmwareBIOS Firmware = "bios" // a PXE 2.1 option ROM under a BIOS
	FirmwareIPXE Firmware = "ipxe" // iPXE in the NIC's ROM (QEMU's default on SeaBIOS)
)

// ParseFirmware accepts uefi, bios or ipxe.
func ParseFirmware(s string) (Firmware, error) {
	switch f := Firmware(s); f {
	case FirmwareUEFI, FirmwareBIOS, FirmwareIPXE:
		return f, nil
	}
	return "", fmt.Errorf("firmware %q: want uefi, bios or ipxe", s)
}

// dhcpIdentity is what a DHCP client says about itself.
type dhcpIdentity struct {
	arch        uint16 // option 93
	ndi         []byte // option 94: UNDI interface type and version
	vendorClass string // option 60
	ipxe        bool   // option 77 "iPXE" and option 175
	maxSize     uint16 // option 57
	params      []dhcpv4.OptionCode
}

// pxeParams is the option 55 list of EDK II's PXE base code (PxeBcDhcp4.c),
// which PXE ROMs send nearly alike.
var pxeParams = optionCodes(1, 2, 3, 4, 5, 6, 12, 13, 15, 17, 18, 22, 23, 28, 40, 41, 42, 43, 50, 51, 54, 58, 59, 60, 66, 67, 97, 128, 129, 130, 131, 132, 133, 134, 135)

// ipxeParams is iPXE's option 55 list (net/udp/dhcp.c, dhcp_request_options_data).
var ipxeParams = optionCodes(1, 3, 6, 7, 12, 15, 17, 26, 43, 60, 66, 67, 119, 128, 129, 130, 131, 132, 133, 134, 135, 175, 203)

func optionCodes(codes ...uint8) []dhcpv4.OptionCode {
	out := make([]dhcpv4.OptionCode, len(codes))
	for i, c := range codes {
		out[i] = dhcpv4.GenericOptionCode(c)
	}
	return out
}

// identity returns what the firmware's DHCP client sends; asIPXE is the
// iPXE the firmware chainloaded.
func identity(fw Firmware, asIPXE bool) dhcpIdentity {
	switch {
	case fw == FirmwareUEFI && !asIPXE:
		return dhcpIdentity{arch: 7, ndi: []byte{1, 3, 16}, vendorClass: "PXEClient:Arch:00007:UNDI:003016", maxSize: 1472, params: pxeParams}
	case fw == FirmwareUEFI:
		return dhcpIdentity{arch: 7, ndi: []byte{1, 3, 10}, vendorClass: "PXEClient:Arch:00007:UNDI:003010", ipxe: true, maxSize: 1472, params: ipxeParams}
	case fw == FirmwareBIOS && !asIPXE:
		return dhcpIdentity{arch: 0, ndi: []byte{1, 2, 1}, vendorClass: "PXEClient:Arch:00000:UNDI:002001", maxSize: 1260, params: pxeParams}
	}
	return dhcpIdentity{arch: 0, ndi: []byte{1, 2, 1}, vendorClass: "PXEClient:Arch:00000:UNDI:002001", ipxe: true, maxSize: 1472, params: ipxeParams}
}

// ipxeEncap is option 175 as iPXE sends it: the features it was built
// with (PXE extensions, HTTP, DNS, TFTP, bzImage, EFI or BIOS), each a
// one-byte-true sub-option, and its version (1.21.1).
func ipxeEncap(arch uint16) []byte {
	b := []byte{0x10, 1, 1, 0x13, 1, 1, 0x11, 1, 1, 0x15, 1, 1, 0x18, 1, 1}
	if arch == 7 {
		b = append(b, 0x24, 1, 1) // EFI
	} else {
		b = append(b, 0x19, 1, 1, 0x21, 1, 1) // PXE, bzImage
	}
	return append(b, 0xeb, 3, 1, 21, 1)
}

// machineUUID is option 97: type 0 and a 16-byte SMBIOS UUID derived
// from the MAC, stable across runs as a real machine's is.
func machineUUID(mac net.HardwareAddr) []byte {
	h := sha256.Sum256(append([]byte("bootfleet-storm"), mac...))
	return append([]byte{0}, h[:16]...)
}

// newClientMessage builds a DISCOVER or REQUEST with the firmware's options.
func newClientMessage(t dhcpv4.MessageType, mac net.HardwareAddr, xid dhcpv4.TransactionID, secs uint16, id dhcpIdentity) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootRequest, HWType: 1, TransactionID: xid,
		NumSeconds: secs, Flags: 0x8000, // broadcast: no address to unicast to yet
		ClientIPAddr: net.IPv4zero.To4(), YourIPAddr: net.IPv4zero.To4(),
		ServerIPAddr: net.IPv4zero.To4(), GatewayIPAddr: net.IPv4zero.To4(),
		ClientHWAddr: mac, Options: dhcpv4.Options{},
	}
	m.UpdateOption(dhcpv4.OptMessageType(t))
	m.UpdateOption(dhcpv4.OptMaxMessageSize(id.maxSize))
	m.UpdateOption(dhcpv4.OptParameterRequestList(id.params...))
	m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{byte(id.arch >> 8), byte(id.arch)}))
	m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, id.ndi))
	m.UpdateOption(dhcpv4.OptClassIdentifier(id.vendorClass))
	m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, machineUUID(mac)))
	if id.ipxe {
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(175), ipxeEncap(id.arch)))
	}
	return m
}

// newRequest is the REQUEST (SELECTING) for a chosen lease offer.
func newRequest(lease *dhcpv4.DHCPv4, mac net.HardwareAddr, xid dhcpv4.TransactionID, secs uint16, id dhcpIdentity) *dhcpv4.DHCPv4 {
	m := newClientMessage(dhcpv4.MessageTypeRequest, mac, xid, secs, id)
	m.UpdateOption(dhcpv4.OptRequestedIPAddress(lease.YourIPAddr))
	if sid := lease.ServerIdentifier(); sid != nil {
		m.UpdateOption(dhcpv4.OptServerIdentifier(sid))
	}
	return m
}

// PXE vendor option (option 43) tags, PXE 2.1 section 2.2.7.
const (
	pxeTagDiscoveryControl = 6
	pxeNoDiscovery         = 1 << 3 // boot the file in this packet, no boot server discovery
)

// ParseVendorOptions splits option 43 into its tag-length-value items
// (pad 0 and end 255 carry no length). A truncated item is an error.
func ParseVendorOptions(b []byte) (map[byte][]byte, error) {
	opts := map[byte][]byte{}
	for i := 0; i < len(b); {
		tag := b[i]
		i++
		switch tag {
		case 0:
			continue
		case 255:
			return opts, nil
		}
		if i >= len(b) || i+1+int(b[i]) > len(b) {
			return nil, fmt.Errorf("option 43: item %d truncated at byte %d of %d", tag, i, len(b))
		}
		n := int(b[i])
		opts[tag] = b[i+1 : i+1+n]
		i += 1 + n
	}
	return opts, nil
}

// offerInfo is what firmware reads from a DHCPOFFER to sort it, after
// EDK II's PxeBcParseDhcp4Packet: an offer with an address, a proxy offer
// (no address, option 60 PXEClient), and where its boot file is.
type offerInfo struct {
	msg      *dhcpv4.DHCPv4
	addr     netip.Addr // yiaddr; invalid for a proxy offer
	bootFile string     // option 67, else the file field
	server   netip.Addr // where the boot file is: siaddr, else option 54
	proxy    bool       // no address, PXEClient: boot information only
	binl     bool       // PXEClient with option 43 but no "boot this file" bit: wants port 4011
	noWait   bool       // iPXE's 175.176 (no-pxedhcp): do not wait for proxy offers
}

func classifyOffer(m *dhcpv4.DHCPv4) offerInfo {
	o := offerInfo{msg: m, bootFile: m.BootFileNameOption()}
	if o.bootFile == "" {
		o.bootFile = m.BootFileName
	}
	if a, ok := netip.AddrFromSlice(m.YourIPAddr.To4()); ok && !a.IsUnspecified() {
		o.addr = a
	}
	if a, ok := netip.AddrFromSlice(m.ServerIPAddr.To4()); ok && !a.IsUnspecified() {
		o.server = a
	} else if a, ok := netip.AddrFromSlice(m.ServerIdentifier().To4()); ok {
		o.server = a
	}
	pxeClient := len(m.ClassIdentifier()) >= 9 && m.ClassIdentifier()[:9] == "PXEClient"
	o.proxy = !o.addr.IsValid() && pxeClient
	if v43 := m.Options.Get(dhcpv4.OptionVendorSpecificInformation); pxeClient && v43 != nil {
		vo, err := ParseVendorOptions(v43)
		dc := vo[pxeTagDiscoveryControl]
		o.binl = err != nil || len(dc) == 0 || dc[0]&pxeNoDiscovery == 0
	}
	if e := m.Options.Get(dhcpv4.GenericOptionCode(175)); e != nil {
		if vo, err := ParseVendorOptions(e); err == nil && len(vo[176]) > 0 && vo[176][0] != 0 {
			o.noWait = true
		}
	}
	return o
}

// selection is the firmware's choice among the offers so far.
type selection struct {
	lease *offerInfo // the offer whose address it requests
	boot  *offerInfo // where the boot file name comes from (lease or a proxy offer)
}

// selectOffers chooses as EDK II's PxeBcSelectDhcp4Offer does, in order:
// an address offer that names a boot file; else an address offer together
// with a proxy offer that names one. complete says the firmware stops
// waiting for more offers: a PXE ROM once it has a boot file, iPXE when
// the offer also says not to wait for ProxyDHCP or a proxy offer came.
func selectOffers(offers []offerInfo, asIPXE bool) (sel selection, complete bool) {
	var proxy *offerInfo
	for i := range offers {
		o := &offers[i]
		switch {
		case o.addr.IsValid() && o.bootFile != "" && !o.binl && (sel.lease == nil || sel.boot == nil):
			sel.lease, sel.boot = o, o
		case o.addr.IsValid() && sel.lease == nil:
			sel.lease = o
		case o.proxy && o.bootFile != "" && !o.binl && proxy == nil:
			proxy = o
		}
	}
	if sel.boot == nil && sel.lease != nil && proxy != nil {
		sel.boot = proxy
	}
	if sel.lease == nil || sel.boot == nil {
		return sel, false
	}
	if asIPXE {
		return sel, sel.boot != sel.lease || sel.lease.noWait
	}
	return sel, true
}
