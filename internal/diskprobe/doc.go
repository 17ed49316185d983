// Package diskprobe reads the first sectors of a block device or disk image
// and decides where the root file system of a diskless machine lives. The
// initramfs agent runs it on /dev/nbd0 (the kernel then mounts
// /dev/nbd0pN); the server runs it on an image file to find its kernel.
//
// The package is pure: it works on any [io.ReaderAt] of known size, never
// logs, never runs programs, and reads only the sectors it needs (the
// MBR, the GPT header and entry array, each EBR of a logical chain, and
// at most two small reads per file system probe).
//
// What it reads:
//   - [ReadTable]: a GPT (UEFI 2.10 §5.3) behind a protective MBR, with
//     512- or 4096-byte sectors, falling back to the backup header at the
//     last LBA when the primary fails its CRC32 checks; else an MBR with
//     its extended (EBR) chain. Partitions are numbered as the Linux
//     kernel numbers them, so Number N is /dev/nbd0pN.
//   - [DetectFS]: ext2/3/4, XFS and btrfs superblocks (type, label, UUID).
//
// [FindRoot] chooses the root. An explicit [Choice] (the kernel command
// line's bootfleet.root.part=N, PARTUUID=… or LABEL=…) always wins.
// Otherwise, in order:
//  1. on a GPT, the first partition of type root-x86-64 of the
//     Discoverable Partitions Specification (DPS) whose no-auto attribute
//     (bit 63) is clear;
//  2. the only partition holding a Linux file system, leaving out
//     partitions the DPS assigns elsewhere (ESP, XBOOTLDR, swap, /home,
//     /srv, /var, /var/tmp, /usr) and no-auto root partitions; several
//     candidates are an error listing them;
//  3. with no partition table (or an empty one), the whole device if it
//     holds a Linux file system;
//  4. otherwise an error that says what was found and what to do.
//
// Every count read from the disk is bounded (GPT entries, entry size,
// logical partitions, EBR hops), so hostile images cannot make the
// package allocate much or loop.
package diskprobe
