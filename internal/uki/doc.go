// Package uki builds unified kernel images: systemd's EFI stub
// (systemd-stub, linuxx64.efi.stub) with a Linux kernel, its initrd and
// optionally an os-release file appended as the PE sections .linux,
// .initrd and .osrel. The result is one EFI application, so a machine
// fetches one file where it fetched two, which is what lets a single
// multicast transfer carry a whole boot.
//
// Build is pure: it reads the stub, kernel and initrds through
// io.ReaderAt with known sizes and streams the image to an io.Writer.
// The stub's headers are patched in place; nothing in its own sections
// moves. The new sections start after the stub's last one, their
// virtual addresses at the stub's SectionAlignment and their file data at
// its FileAlignment, as the PE/COFF specification ("Section Table")
// requires. The checksum is set to zero, which UEFI firmware does not
// check.
//
// At boot (systemd 252) the stub takes the kernel command line from its
// own LoadOptions when Secure Boot is off, which is where iPXE puts
// "NAME ARGS" for any EFI image, starts .linux through LoadImage and
// StartImage, and hands .initrd to the kernel through the
// LINUX_INITRD_MEDIA_GUID LoadFile2 device path (Linux 5.8 and later).
package uki
