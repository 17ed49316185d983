// Package initramfs builds the initramfs of a bootfleet diskless client: a
// gzip'd newc cpio archive holding the static bootfleet-agent as /init,
// static busybox (for udhcpc and switch_root), and the kernel modules the
// agent needs, taken from a stock Debian kernel package.
//
// Layers: cpio.go is the archive writer (pure, no files); modules.go reads
// a kernel's lib/modules/VERSION tree and orders modules dependencies first,
// from each module's own .modinfo (depends= and softdep pre:), so no
// depmod output or host modprobe is needed; build.go assembles the archive.
//
// The archive is reproducible: entries are sorted, times are zero and
// owners root, so the same inputs give the same bytes.
package initramfs
