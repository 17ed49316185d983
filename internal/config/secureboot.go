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
}
