// Package initramfs builds the initramfs of a bootfleet diskless client: an
// xz'd (or gzip'd) newc cpio archive holding the static bootfleet-agent as
// /init, static busybox (for udhcpc and switch_root), and the kernel
// modules the agent needs to reach the root, taken from a stock Debian
// kernel package: nbd, the file system, the NIC drivers (nic.go) and
// those of client-side write caches. Every other module comes from the
// root's own /lib/modules: every machine fetches the initramfs at every
// boot, by unicast.
//
// Layers: cpio.go is the archive writer (pure, no files); modules.go reads
// a kernel's lib/modules/VERSION tree and orders modules dependencies first,
// from each module's own .modinfo (depends= and softdep pre:), so no
// depmod output or host modprobe is needed; build.go assembles the archive
// and compress.go compresses it.
//
// The archive is reproducible: entries are sorted, times are zero and
// owners root, so the same inputs (and the same xz version) give the same
// bytes.
package initramfs
