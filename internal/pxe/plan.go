package pxe

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Default boot files, as shipped by Debian's ipxe package in /usr/lib/ipxe.
const (
	DefaultBIOSFile   = "undionly.kpxe" // iPXE using the NIC ROM's UNDI driver; works on any PXE BIOS NIC
	DefaultEFIx64File = "ipxe.efi"      // iPXE with its own NIC drivers; snponly.efi uses the firmware's instead
)

// The signed chain's files as clients ask for them. Shim loads its second
// stage from the directory it came from under the name grubx64.efi
// (grubaa64.efi on arm64), so both sit side by side, on TFTP and under
// HTTP /files/.
const (
	ShimFile      = "shimx64.efi"
	GrubFile      = "grubx64.efi"
	ShimARM64File = "shimaa64.efi"
	GrubARM64File = "grubaa64.efi"
)

// CPU names the CPU architecture a firmware architecture runs kernels of,
// as profiles name it (inventory.ArchX86_64, inventory.ArchARM64), or ""
// for one bootfleet boots no kernels of. 32-bit x86 UEFI boots x86_64
// kernels (EFI mixed mode), as it always did.
func (a Arch) CPU() string {
	switch a {
	case ArchBIOS, ArchEFIIA32, ArchEFIx64, ArchEFIBC, ArchEFIIA32HTTP, ArchEFIx64HTTP:
		return "x86_64"
	case ArchEFIARM64, ArchEFIARM64HTTP:
		return "arm64"
	}
	return ""
}

// PlanConfig says which file each kind of firmware gets. The zero value of a
// file field means its default (BIOS and UEFI x64) or "not supported" (the rest).
type PlanConfig struct {
	BIOSFile     string // TFTP path for x86 BIOS PXE; default DefaultBIOSFile
	EFIx64File   string // TFTP path (or /files/ name for HTTP boot) for x86-64 UEFI; default DefaultEFIx64File
	EFIIA32File  string // for 32-bit x86 UEFI; default "" (refused: Debian ships no 32-bit ipxe.efi)
	EFIARM64File string // for ARM64 UEFI; default "" (refused)

	// HTTPBase is the server's base URL, e.g. "http://10.213.0.1:8080", no
	// trailing slash. UEFI HTTP boot gets HTTPBase+"/files/"+file and iPXE gets
	// its script URL from it. Empty means only TFTP plans are possible.
	HTTPBase string

	// Signed reports whether mac boots through the signed chain (its
	// profile's loader is grub): x86-64 UEFI firmware then gets ShimFile
	// instead of iPXE, arm64 UEFI firmware ShimARM64File when SignedARM64.
	// nil: no machine does.
	Signed func(mac net.HardwareAddr) bool
	// SignedARM64 says the arm64 shim and grub are served.
	SignedARM64 bool
	// SignedARM64Disk says arm64 UEFI HTTP Boot clients of the signed
	// chain are served a disk image (ARM64DiskURL): Debian's grubnetaa64
	// cannot load files over HTTP, so they get no shim to load it.
	SignedARM64Disk bool

	// Boots reports whether mac's profile has a kernel for cpu (Arch.CPU).
	// A machine whose profile has none gets no boot file, so it never
	// loads another architecture's kernel; the error says why. nil: every
	// profile boots every architecture.
	Boots func(mac net.HardwareAddr, cpu string) bool

	// ScriptURL overrides the iPXE script URL. Default:
	// HTTPBase+"/ipxe/"+mac with the MAC in hyphen form (52-54-00-12-34-56).
	ScriptURL func(mac net.HardwareAddr) string
}

// Proto is how the boot file is fetched.
type Proto int

// Boot file transports.
const (
	ProtoTFTP Proto = iota // Plan.BootFile is a path on the TFTP server (siaddr)
	ProtoHTTP              // Plan.BootFile is an absolute http:// URL
)

// String returns "tftp" or "http".
func (p Proto) String() string {
	if p == ProtoHTTP {
		return "http"
	}
	return "tftp"
}

// Plan is what the DHCP reply tells the firmware to boot.
type Plan struct {
	Proto    Proto
	BootFile string // option 67 and the legacy file field: TFTP path or URL

	// VendorClass is the option 60 value the reply must carry, or "" when the
	// DHCP layer decides. UEFI HTTP boot ignores offers without "HTTPClient".
	VendorClass string
}

// ErrNoPlan is wrapped by every PlanFor error: the client is not booted by
// this server and its DHCP request should get no boot options.
var ErrNoPlan = errors.New("no boot plan")

// PlanFor chooses the next boot step for a client.
//
// iPXE is checked first, so iPXE always gets its script and is never handed an
// iPXE binary again (which would loop forever). Errors wrap ErrNoPlan and say
// what the admin can set to boot such a client.
func PlanFor(c Client, mac net.HardwareAddr, cfg PlanConfig) (Plan, error) {
	if cfg.BIOSFile == "" {
		cfg.BIOSFile = DefaultBIOSFile
	}
	if cfg.EFIx64File == "" {
		cfg.EFIx64File = DefaultEFIx64File
	}
	switch {
	case c.Boot() && c.HasArch && cfg.Boots != nil && c.Arch.CPU() != "" && !cfg.Boots(mac, c.Arch.CPU()):
		return Plan{}, fmt.Errorf("%w: the machine is %s (option 93 code %d), and its profile has no %s kernel; add one to the profile (arm64: {kernel: ...} for arm64) or give the machine a profile that has one",
			ErrNoPlan, c.Arch, uint16(c.Arch), c.Arch.CPU())
	case c.IPXE:
		u, err := scriptURL(mac, c.Arch, cfg)
		if err != nil {
			return Plan{}, err
		}
		return Plan{Proto: ProtoHTTP, BootFile: u}, nil
	case c.HTTPBoot:
		if cfg.HTTPBase == "" {
			return Plan{}, fmt.Errorf("%w: UEFI HTTP boot client (%s) but no HTTP base URL is configured; set the HTTP listen address", ErrNoPlan, c.Arch)
		}
		if c.Arch.CPU() == "arm64" && cfg.Signed != nil && cfg.Signed(mac) {
			if !cfg.SignedARM64Disk {
				return Plan{}, fmt.Errorf("%w: the machine's profile has loader grub and the client is %s, which boots over HTTP a disk image with grub inside; set secure_boot.grub_arm64_disk to Debian's grubaa64.efi.signed (scripts/arm64.sh fetches it)", ErrNoPlan, c.Arch)
			}
			return Plan{Proto: ProtoHTTP, BootFile: ARM64DiskURL(cfg.HTTPBase, mac), VendorClass: VendorHTTP}, nil
		}
		f, err := firmwareFile(c.Arch, mac, cfg)
		if err != nil {
			return Plan{}, err
		}
		return Plan{Proto: ProtoHTTP, BootFile: strings.TrimRight(cfg.HTTPBase, "/") + "/files/" + strings.TrimLeft(f, "/"), VendorClass: VendorHTTP}, nil
	case c.PXE:
		if c.Arch == ArchBIOS {
			return Plan{Proto: ProtoTFTP, BootFile: cfg.BIOSFile}, nil
		}
		f, err := firmwareFile(c.Arch, mac, cfg)
		if err != nil {
			return Plan{}, err
		}
		return Plan{Proto: ProtoTFTP, BootFile: f}, nil
	default:
		return Plan{}, fmt.Errorf("%w: client is not network-boot firmware (vendor class %q, no iPXE user class)", ErrNoPlan, c.VendorClass)
	}
}

// firmwareFile is what UEFI firmware loads: shim for a machine on the
// signed chain, else iPXE. Debian signs its chain for x86-64 only.
func firmwareFile(a Arch, mac net.HardwareAddr, cfg PlanConfig) (string, error) {
	if cfg.Signed == nil || !cfg.Signed(mac) {
		return efiFile(a, cfg)
	}
	switch a {
	case ArchEFIx64, ArchEFIBC, ArchEFIx64HTTP:
		return ShimFile, nil
	case ArchEFIARM64, ArchEFIARM64HTTP:
		if cfg.SignedARM64 {
			return ShimARM64File, nil
		}
		return "", fmt.Errorf("%w: the machine's profile has loader grub and the client is %s, but no arm64 shim and grub are served; set secure_boot.shim_arm64 and secure_boot.grub_arm64 (scripts/arm64.sh fetches them)", ErrNoPlan, a)
	}
	return "", fmt.Errorf("%w: the machine's profile has loader grub, but the signed shim and grub are for uefi-x64 and uefi-arm64 and the client is %s; give it a profile with loader ipxe", ErrNoPlan, a)
}

// efiFile maps a UEFI architecture (PXE or HTTP flavour) to its iPXE binary.
func efiFile(a Arch, cfg PlanConfig) (string, error) {
	var f, knob string
	switch a {
	case ArchEFIx64, ArchEFIBC, ArchEFIx64HTTP:
		return cfg.EFIx64File, nil
	case ArchEFIIA32, ArchEFIIA32HTTP:
		f, knob = cfg.EFIIA32File, "EFIIA32File"
	case ArchEFIARM64, ArchEFIARM64HTTP:
		f, knob = cfg.EFIARM64File, "ipxe.efi_arm64_binary"
	default:
		return "", fmt.Errorf("%w: client architecture %s (option 93 code %d) is not supported; bootfleet boots bios, uefi-x64, uefi-ia32 and uefi-arm64", ErrNoPlan, a, uint16(a))
	}
	if f == "" {
		return "", fmt.Errorf("%w: no iPXE binary configured for %s clients; set %s to an iPXE build for that architecture", ErrNoPlan, a, knob)
	}
	return f, nil
}

// scriptURL is iPXE's script URL. An arm64 iPXE's asks for the arm64
// kernel (?arch=arm64); x86 ones keep the plain URL.
func scriptURL(mac net.HardwareAddr, a Arch, cfg PlanConfig) (string, error) {
	if cfg.ScriptURL != nil {
		return cfg.ScriptURL(mac), nil
	}
	if cfg.HTTPBase == "" {
		return "", fmt.Errorf("%w: iPXE client but no HTTP base URL is configured for its script; set the HTTP listen address", ErrNoPlan)
	}
	u := strings.TrimRight(cfg.HTTPBase, "/") + "/ipxe/" + HyphenMAC(mac)
	if a.CPU() == "arm64" {
		u += "?arch=arm64"
	}
	return u, nil
}

// ARM64DiskURL is where an arm64 UEFI HTTP Boot client of the signed
// chain downloads its disk image: the firmware loads an
// application/vnd.efi-img into a RAM disk and boots
// \EFI\BOOT\BOOTAA64.EFI from it.
func ARM64DiskURL(base string, mac net.HardwareAddr) string {
	return strings.TrimRight(base, "/") + "/grub/" + HyphenMAC(mac) + "/arm64/" + ARM64DiskFile
}

// ARM64DiskFile is the name of that image.
const ARM64DiskFile = "disk.img"

// HyphenMAC formats a MAC as 52-54-00-12-34-56, the form used in URLs
// (colons would need escaping in some iPXE versions and in file names).
func HyphenMAC(mac net.HardwareAddr) string {
	return strings.ReplaceAll(mac.String(), ":", "-")
}
