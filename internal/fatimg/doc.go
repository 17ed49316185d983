// Package fatimg writes a FAT16 image of a few files, such as the disk
// image UEFI HTTP Boot downloads into a RAM disk and boots
// \EFI\BOOT\BOOTAA64.EFI from.
//
// The image is a superfloppy: a FAT16 file system with no partition table,
// which EDK II's FAT driver mounts on the whole RAM disk. Files are laid
// out contiguously, directories first, and every timestamp is the FAT
// epoch, so the same files always give the same bytes. Names that are not
// upper-case 8.3 names get a VFAT long name beside a generated short one.
// The layout follows Microsoft's "FAT: General Overview of On-Disk Format"
// (FAT16, 512-byte sectors, two FATs, a 512-entry root directory).
package fatimg
