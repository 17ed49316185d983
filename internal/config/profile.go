package config

import "github.com/bootfleet/bootfleet/internal/inventory"

// Profile is a profile as the file writes it, under profiles:. Kernel and
// initrds are local paths or http(s) URLs; Cmdline is a Go template (see
// package ipxe for its fields). Kernel is required unless Root.Kernel is
// image, which needs Kernel and Initrd empty. The servers never see this
// type: package inventorysvc maps it onto inventory.Profile.
type Profile struct {
	Kernel  string   `yaml:"kernel"` // what x86_64 machines boot
	Initrd  []string `yaml:"initrd"`
	Cmdline string   `yaml:"cmdline"`
	// ARM64 is what arm64 machines boot: arm64: {kernel: ..., initrd:
	// [...]}. A profile may name kernels for both architectures, or for
	// one; a machine of an architecture its profile has no kernel for
	// gets no boot file.
	ARM64 ArchFiles `yaml:"arm64"`
	// Root, if its Image is set, gives the machine a diskless root over
	// NBD: the script's command line gets bootfleet.root=nbd:IP:PORT:EXPORT.
	Root Root `yaml:"root"`
	// Loader is what UEFI x64 firmware loads: ipxe (default) or grub,
	// Debian's signed Shim and Grub from secure_boot, which boot with
	// Secure Boot on. BIOS machines and iPXE ROMs always run iPXE.
	Loader string `yaml:"loader"`
	// Vars are free-form values the profile's and its machines' file
	// templates see as {{.Vars.NAME}}; a machine's vars win.
	Vars map[string]string `yaml:"vars"`
	// Files are written into each machine's diskless root at every boot.
	Files []File `yaml:"files"`
}

// ArchFiles is a kernel and its initrds for one architecture.
type ArchFiles struct {
	Kernel string   `yaml:"kernel"`
	Initrd []string `yaml:"initrd"`
}

// Root is a profile's diskless root.
type Root struct {
	// Image is the name of an image imported with `bootfleet image import`.
	Image string `yaml:"image"`
	// Overlay says what happens to the machine's writes: ephemeral
	// (default; discarded at every boot), persistent (kept until
	// `bootfleet machine reset`) or none (read-only root), all kept by
	// the server; or client-ram or client-disk, kept by the machine in
	// its RAM or on its local disk (bootfleet.cache= on the cmdline) and
	// lost at reboot, so that any server holding the image can serve it.
	Overlay string `yaml:"overlay"`
	// Kernel says what the machine boots: empty (default) for the
	// profile's own kernel and initrd, or image (inventory.RootKernelImage)
	// for the newest kernel in the image's /boot with an initramfs bootfleet
	// builds from the image's /lib/modules, so importing a new version of
	// the image brings its kernel along.
	Kernel string `yaml:"kernel"`
	// Channel is which version of the image the machines boot: production
	// (default: the version promoted last), test (the newest in test or
	// production), or a version number to pin.
	Channel string `yaml:"channel"`
}

// validateProfiles checks each profile against the inventory's rules for
// its values, naming the file's keys, and against the rest of the file
// (a grub loader needs secure_boot).
func (c *Config) validateProfiles(bad func(key, format string, args ...any)) {
	if c.SecureBoot.GrubARM64Disk != "" && c.SecureBoot.ShimARM64 == "" {
		bad("secure_boot.grub_arm64_disk", "needs secure_boot.shim_arm64: the disk image boots shim, which loads this grub (scripts/arm64.sh fetches both)")
	}
	for _, name := range sortedKeys(c.Profiles) {
		p := c.Profiles[name]
		validateRootKernel("profiles."+name, p, bad)
		validateFiles("profiles."+name, p.Files, p.Vars, bad)
		switch p.Loader {
		case "", inventory.LoaderIPXE:
		case inventory.LoaderGrub:
			if p.Kernel != "" && (c.SecureBoot.Shim == "" || c.SecureBoot.Grub == "") {
				bad("profiles."+name+".loader", "grub needs secure_boot.shim and secure_boot.grub: the signed binaries from Debian's shim-signed and grub-efi-amd64-signed (see README, Secure Boot)")
			}
			if p.ARM64.Kernel != "" && (c.SecureBoot.ShimARM64 == "" || c.SecureBoot.GrubARM64 == "") {
				bad("profiles."+name+".loader", "grub with an arm64 kernel needs secure_boot.shim_arm64 and secure_boot.grub_arm64: the signed binaries from Debian's shim-signed:arm64 and grub-efi-arm64-signed:arm64 (scripts/arm64.sh fetches them)")
			}
		default:
			bad("profiles."+name+".loader", "want ipxe (default) or grub (Secure Boot through Debian's signed shim and grub), got %q", p.Loader)
		}
		switch {
		case p.Root.Image == "" && p.Root.Overlay != "":
			bad("profiles."+name+".root.image", "required when root.overlay is set: the name of an imported image")
		case p.Root.Image != "" && inventory.CheckOverlay(p.Root.Overlay, p.Cmdline) != "":
			bad("profiles."+name+".root.overlay", "%s", inventory.CheckOverlay(p.Root.Overlay, p.Cmdline))
		}
	}
}

// validateRootKernel checks a profile's kernel, initrd and root.kernel,
// which say together where the kernel comes from.
func validateRootKernel(key string, p Profile, bad func(key, format string, args ...any)) {
	switch p.Root.Kernel {
	case "":
		if p.Kernel == "" && p.ARM64.Kernel == "" {
			bad(key+".kernel", "required: a local path or http URL of the kernel x86_64 machines boot, or arm64.kernel for arm64 machines (or set root.kernel: image to boot the kernel of the root image)")
		}
	case inventory.RootKernelImage:
		if p.Root.Image == "" {
			bad(key+".root.image", "required when root.kernel is image: the name of an imported image whose kernel boots")
		}
		if p.Kernel != "" {
			bad(key+".kernel", "must be empty with root.kernel: image, which boots the kernel in the root image; remove kernel, or remove root.kernel to boot this one")
		}
		if len(p.Initrd) > 0 {
			bad(key+".initrd", "must be empty with root.kernel: image, which builds the initramfs from the root image; remove initrd, or remove root.kernel to boot these")
		}
	default:
		bad(key+".root.kernel", "want image (boot the kernel in the root image) or nothing (boot the profile's kernel), got %q", p.Root.Kernel)
	}
}
