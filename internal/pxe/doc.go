// Package pxe recognises network-boot firmware in a DHCPv4 request and decides
// what it should boot next.
//
// It is pure: no sockets, no logging, no clock. [Detect] reads the options a
// client sends (RFC 4578 option 93 client architecture, option 60 vendor class,
// RFC 3004 option 77 user class and iPXE's encapsulated option 175) into a
// [Client]; [PlanFor] turns a Client into a [Plan]: the boot file name or URL
// the DHCP server puts in siaddr/file and options 66/67.
//
// The chain is always the same: PXE or UEFI HTTP boot firmware loads iPXE,
// and iPXE (recognised by its user class, so it is never handed iPXE again)
// loads its per-machine script over HTTP.
package pxe
