package inventory

import (
	"fmt"
	"slices"
	"strings"
)

// Profile is what a machine boots. Kernel and Initrd are local paths or
// http(s) URLs; Cmdline is a template rendered per machine by package ipxe.
// It is the one profile type every serving package takes; the config
// file's schema maps onto it in package inventorysvc.
//
// A profile names one kernel per CPU architecture: Kernel and Initrd are
// what x86_64 machines boot, ARM64 what arm64 machines boot. Either may be
// empty, and a machine of an architecture its profile has no kernel for
// is refused, never given another architecture's files (Files).
type Profile struct {
	Name    string
	Kernel  string // for x86_64 machines
	Initrd  []string
	Cmdline string
	// ARM64 is the kernel and initrds of arm64 machines; an empty Kernel
	// means the profile does not boot them.
	ARM64 ArchBoot
	// Root is the machine's diskless root, if Root.Image is set.
	Root Root
	// Loader is what UEFI x64 firmware loads: empty or LoaderIPXE for
	// iPXE, LoaderGrub for the signed shim and grub. BIOS machines and
	// iPXE ROMs always run iPXE.
	Loader string
	// RootFiles and Vars are the files: the agent writes into the roots
	// of the profile's machines and the vars: their templates see, set
	// through the API. A config profile keeps its own in the config.
	RootFiles []RootFile
	Vars      map[string]string
	Source    Source // default api
}

// ArchBoot is a kernel and its initrds for one CPU architecture: local
// paths or http(s) URLs.
type ArchBoot struct {
	Kernel string   `json:"kernel"`
	Initrd []string `json:"initrd,omitempty"`
}

// CPU architectures a profile boots, named as grub names its CPU
// ($grub_cpu) and as Files takes them.
const (
	ArchX86_64 = "x86_64"
	ArchARM64  = "arm64"
)

// Arches are the architectures p has a kernel for, x86_64 first.
func (p Profile) Arches() []string {
	var out []string
	for _, a := range []string{ArchX86_64, ArchARM64} {
		if _, ok := p.Files(a); ok {
			out = append(out, a)
		}
	}
	return out
}

// Files is the kernel and initrds p boots on arch (ArchX86_64 or
// ArchARM64), and false when p has no kernel for arch. A profile whose
// kernel comes from its root image (Root.Kernel image) has no files of
// its own here.
func (p Profile) Files(arch string) (ArchBoot, bool) {
	var b ArchBoot
	switch arch {
	case ArchX86_64:
		b = ArchBoot{Kernel: p.Kernel, Initrd: p.Initrd}
	case ArchARM64:
		b = p.ARM64
	}
	return b, b.Kernel != ""
}

// Loaders are the values of Profile.Loader.
const (
	LoaderIPXE = "ipxe" // UEFI firmware chainloads iPXE, which runs the profile's script (default)
	LoaderGrub = "grub" // UEFI firmware loads the signed shim, then Grub, which runs the profile's grub.cfg
)

// Root is a profile's diskless root.
type Root struct {
	// Image names an Image to serve as the machine's root over NBD; empty
	// for none.
	Image string
	// Overlay says what happens to the machine's writes, one of
	// OverlayModes; Validate sets OverlayEphemeral when Image is set and
	// Overlay is empty.
	Overlay string
	// Kernel is empty to boot the profile's Kernel and Initrd, or
	// RootKernelImage to boot the newest kernel Image holds, with an
	// initramfs built from it; Kernel and Initrd are then empty.
	Kernel string
	// Channel is which version of Image the machines boot: "" for the
	// current production version, ChannelTest for the newest version in
	// test or production, or a version number (e.g. "3") pinning it.
	Channel string
}

// Overlay modes. The server keeps the writes of ephemeral (discarded at
// every boot) and persistent (kept until the machine is reset) roots;
// none is a read-only root. The client modes are kept by the machine
// itself, in its RAM or on its local disk, so the server serves the image
// read-only and holds nothing for the machine.
const (
	OverlayEphemeral  = "ephemeral"
	OverlayPersistent = "persistent"
	OverlayNone       = "none"
	OverlayClientRAM  = "client-ram"
	OverlayClientDisk = "client-disk"
)

// OverlayModes are the valid values of Root.Overlay.
var OverlayModes = []string{OverlayEphemeral, OverlayPersistent, OverlayNone, OverlayClientRAM, OverlayClientDisk}

// ClientOverlay says whether the machine, not the server, keeps the
// writes of overlay mode s.
func ClientOverlay(s string) bool { return s == OverlayClientRAM || s == OverlayClientDisk }

// RootKernelImage is the value of Root.Kernel that boots the kernel the
// root image holds.
const RootKernelImage = "image"

// CheckOverlay says what is wrong with a root's overlay mode and the
// profile's cmdline template, or "" if nothing: client-disk must name its
// cache device, because the agent wipes it.
func CheckOverlay(overlay, cmdline string) string {
	switch {
	case !slices.Contains(OverlayModes, overlay):
		return fmt.Sprintf("want ephemeral, persistent, none, client-ram or client-disk, got %q", overlay)
	case overlay == OverlayClientDisk && !strings.Contains(cmdline, "bootfleet.cache="):
		return "client-disk needs the local disk to wipe and use as the cache on the cmdline: add bootfleet.cache=/dev/vda or bootfleet.cache=LABEL=NAME"
	}
	return ""
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
	if p.Loader != "" && p.Loader != LoaderIPXE && p.Loader != LoaderGrub {
		return invalid("loader", "want ipxe (default) or grub (Secure Boot through the server's signed shim and grub), got %q", p.Loader)
	}
	switch {
	case p.Root.Image == "" && p.Root.Overlay != "":
		return invalid("root_image", "required when overlay is set: the name of an imported image")
	case p.Root.Image == "":
	case !pnameRE.MatchString(p.Root.Image):
		return invalid("root_image", "want an image name (letters, digits, . _ -, at most 63), got %q", p.Root.Image)
	case p.Root.Overlay == "":
		p.Root.Overlay = OverlayEphemeral
	case CheckOverlay(p.Root.Overlay, p.Cmdline) != "":
		return invalid("overlay", "%s", CheckOverlay(p.Root.Overlay, p.Cmdline))
	}
	if p.Root.Channel == ChannelProduction {
		p.Root.Channel = ""
	}
	if p.Root.Channel != "" && p.Root.Image == "" {
		return invalid("root_image", "required when root_channel is set: the name of an imported image")
	}
	if msg := CheckChannel(p.Root.Channel); msg != "" {
		return invalid("root_channel", "%s", msg)
	}
	if err := validateRootFiles(p.RootFiles, p.Vars); err != nil {
		return err
	}
	return checkSource(&p.Source)
}

// validateKernel checks where the kernel comes from: Kernel and Initrd,
// or the root image (Root.Kernel image).
func (p *Profile) validateKernel() error {
	switch p.Root.Kernel {
	case "":
	case RootKernelImage:
		switch {
		case p.Root.Image == "":
			return invalid("root_image", "required when root_kernel is image: the name of an imported image whose kernel boots")
		case p.Kernel != "":
			return invalid("kernel", "must be empty when root_kernel is image (the kernel comes from the root image); remove it, or remove root_kernel to boot it")
		case len(p.Initrd) > 0:
			return invalid("initrd", "must be empty when root_kernel is image (the initramfs is built from the root image); remove them, or remove root_kernel to boot them")
		case p.ARM64.Kernel != "" || len(p.ARM64.Initrd) > 0:
			return invalid("arm64", "must be empty when root_kernel is image: the image's kernel is for one architecture; give arm64 machines a profile of their own")
		}
		return nil
	default:
		return invalid("root_kernel", "want image (boot the kernel in the root image) or empty (boot kernel and initrd), got %q", p.Root.Kernel)
	}
	if strings.TrimSpace(p.Kernel) == "" && strings.TrimSpace(p.ARM64.Kernel) == "" {
		return invalid("kernel", "required: a local path or http(s) URL of the kernel for x86_64 machines, or arm64.kernel for arm64 ones (or root_kernel image with a root_image)")
	}
	if strings.TrimSpace(p.Kernel) == "" && len(p.Initrd) > 0 {
		return invalid("initrd", "given without a kernel: set kernel too, or remove the initrds")
	}
	if strings.TrimSpace(p.ARM64.Kernel) == "" && len(p.ARM64.Initrd) > 0 {
		return invalid("arm64.initrd", "given without arm64.kernel: set it too, or remove the initrds")
	}
	for key, rds := range map[string][]string{"initrd": p.Initrd, "arm64.initrd": p.ARM64.Initrd} {
		for i, rd := range rds {
			if strings.TrimSpace(rd) == "" {
				return invalid(key, "entry %d is empty; remove it or give a path or URL", i)
			}
		}
	}
	return nil
}
