// Package imagekernel makes the boot files of profiles whose root.kernel
// is image: the kernel a root image holds, and an initramfs built from
// that image's own modules (package initramfs, Options.Image), so a new
// import of the image brings its kernel along.
//
// Files are built once per image content, into
//
//	DATA/kernels/<sha256>/vmlinuz
//	DATA/kernels/<sha256>/initrd.img
//
// keyed by content, not name: a script names the sha256 its NBD export
// serves, so a re-import between the script and the kernel download
// cannot pair one version's kernel with another's root.
//
// A build writes into a private directory and renames it into place, so
// a file is served whole or not at all. Concurrent requests for the same
// content share one build; a failed build is returned to every request
// waiting on it and tried again by the next one, never remembered.
package imagekernel
