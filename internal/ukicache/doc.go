// Package ukicache keeps the unified kernel images (package uki) the
// server hands to UEFI machines, one per (stub, kernel, initrds), on disk.
//
// An image is named by a hash of its inputs' identities (path, size and
// modification time of each), so a changed kernel or initrd, or a new
// stub after a package upgrade, names a new image and the old one is
// never served again: each build removes the images not opened for
// Unused (opening records its use in the file's modification time, so
// it outlives a restart). Images are built on first use, into a temporary
// file renamed into place when complete: a reader sees a whole image or
// none, and a crash mid-build leaves only a temporary file. Concurrent
// requests for one image share its build.
package ukicache
