// Package rootdisk is the policy behind diskless roots: which
// NBD export a machine may open, on which image, with which overlay.
//
// Each time a machine's iPXE script is rendered, [Manager.Issue] draws a
// new random secret and records the boot: the image content (sha256) the
// name pointed to at that moment, and the overlay mode. The script's
// kernel command line carries
//
//	bootfleet.root=nbd:SERVER_IP:PORT:m-<mac with hyphens>-<secret>
//
// and the secret stays valid until the next render for that machine.
// [Manager.Lookup] (an nbd.Exports) checks the secret in constant time and,
// where a DHCP lease for the MAC is known, that the client connects from
// the leased address. Export names are never listed.
//
// Overlays live in DATA/overlays/<mac with hyphens>/. Ephemeral overlays
// are discarded at every Issue (every boot) but survive reconnects within
// a boot; persistent ones stay until [Manager.Reset]; mode none serves the
// base read-only. All NBD sessions of one machine share one open overlay,
// so a client that reconnects while its old connection lingers gets the
// same disk.
//
// Overlays client-ram and client-disk are kept by the machine itself
// (package agent builds them), so the server holds nothing for it: the
// script names a read-only export of the image content whose name any
// server of the fleet can check (see base.go), and adds
// bootfleet.overlay=MODE to the command line.
//
// Package images deletes image content; [Manager.InUse] tells it whether
// a machine of this server still boots from it, and holds off new boots
// of it while the content goes.
package rootdisk
