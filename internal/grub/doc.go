// Package grub renders the grub.cfg files of the signed boot chain
// (UEFI firmware → shim → Debian's grubnetx64 → kernel). It only renders
// text: which machine boots what, and where files are served, is decided
// by its callers.
//
// Debian's signed grubnetx64.efi cannot be given a config of our own: its
// embedded config reads $prefix/x86_64-efi/grub.cfg, else $prefix/grub.cfg,
// with prefix /grub on the server it was loaded from (TFTP or HTTP). That
// file is the same for every machine ([Stage1]); it hands over to the
// machine's own config, $prefix/MAC/grub.cfg by grub's $net_default_mac
// ([Render]). Everything comes from the server and by the protocol grub
// came by: Debian 12's grubnetx64 has tftp but no http built in.
//
// Debian 12's arm64 build, grubnetaa64.efi, reads $prefix/grub.cfg too.
// [Stage1] sends a grub whose $grub_cpu is arm64 to
// $prefix/MAC/arm64/grub.cfg, so its machine's config names the arm64
// kernel of its profile; $prefix/arm64-efi/grub.cfg ([Stage1ARM64]) does
// the same for a grub that reads its architecture's directory.
package grub
