package config

// SecureBoot names Debian's signed boot chain: UEFI firmware loads Shim
// (signed by Microsoft's UEFI CA), which loads Grub (signed by Debian,
// whose key shim carries), which loads a kernel signed by Debian.
type SecureBoot struct {
	// Shim is shimx64.efi.signed from Debian's shim-signed package, e.g.
	// /usr/lib/shim/shimx64.efi.signed.
	Shim string `yaml:"shim"`
	// Grub is grubnetx64.efi.signed from grub-efi-amd64-signed, e.g.
	// /usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed: the network
	// build, with the net and http modules inside.
	Grub string `yaml:"grub"`
	// ShimARM64 and GrubARM64 are the same for arm64 machines:
	// shimaa64.efi.signed from shim-signed:arm64 and grubnetaa64.efi.signed
	// from grub-efi-arm64-signed:arm64 (scripts/arm64.sh downloads both).
	// Default none: a grub profile then boots no arm64 machine.
	ShimARM64 string `yaml:"shim_arm64"`
	GrubARM64 string `yaml:"grub_arm64"`
	// GrubARM64Disk is grubaa64.efi.signed from grub-efi-arm64-signed:arm64,
	// the build without network file access. arm64 UEFI HTTP Boot gets a
	// disk image holding shim, this grub, its grub.cfg, kernel and initrds,
	// because grubnetaa64 cannot fetch files over HTTP. Default none: arm64
	// HTTP Boot clients of grub profiles get no boot file.
	GrubARM64Disk string `yaml:"grub_arm64_disk"`
}
