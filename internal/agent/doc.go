// Package agent is bootfleet-agent, the /init of the initramfs that
// `bootfleet initramfs build` makes: it turns a stock Debian kernel into a
// diskless client whose root file system is an NBD export on bootfleet.
//
// The boot, in order (see Agent.Boot):
//
//  1. mount /proc, /sys, /dev (devtmpfs) and /run (tmpfs);
//  2. load the modules listed in /etc/modules, in that order (the builder
//     wrote them dependencies first; see internal/initramfs); nbd gets
//     max_part=16, so whole-disk images show their partitions; all the
//     NIC drivers listed in /etc/nic-modules are among them, and one that
//     fails to load is only logged (see loadModules);
//  3. read bootfleet.root=nbd:HOST:PORT:EXPORT from the kernel command line
//     (or nbd:HOST:PORT,HOST:PORT,...:EXPORT: every server that serves the
//     export, in order; HOST may be [IPV6]; internal/rootarg parses it) and
//     bring up the first Ethernet NIC in the families its servers need
//     (PlanNetwork): DHCPv4 for IPv4 servers and names (busybox udhcpc and
//     the script in /etc/udhcpc/script, which records the lease in
//     LeaseFile), and for IPv6 servers the kernel's SLAAC address, which
//     the agent waits for and records itself;
//  4. dial the first server that answers and run the NBD fixed
//     newstyle handshake itself (NBD_OPT_GO, falling back to
//     NBD_OPT_EXPORT_NAME), with internal/nbd's ClientHandshake;
//  5. hand the socket to the kernel over the NBD generic netlink family
//     (NBD_CMD_CONNECT on /dev/nbd0) with a dead-connection timeout;
//  6. find the root on /dev/nbd0 with internal/diskprobe (a partition by
//     its Discoverable Partitions type, the only Linux partition, or the
//     whole device; bootfleet.root.part= chooses) and its file system type
//     (bootfleet.rootfstype= overrides), and mount it on /newroot;
//  7. with bootfleet.identity=URL, fetch the machine's identity from the
//     server that serves the root, with the export name as the credential,
//     and write it into the new root (identity.go): the host name (also set
//     in the kernel, so systemd starts with it) in /etc/hostname, the
//     machine-id in /etc/machine-id, the SSH host keys, if the root has
//     sshd, in place of the image's own, and the rendered files; each file
//     is renamed into place, and on a read-only root mounted over the
//     image's; any failure stops the boot;
//  8. check that the new root's init (/sbin/init, or bootfleet.init=)
//     resolves inside it (ResolveInRoot), write the network hand-off files
//     (HandoffFiles) into /run, move /proc, /sys, /dev and /run into the new
//     root and exec busybox switch_root.
//
// Reconnection: before switch_root the agent starts a copy of itself in
// "watch" mode, named @bootfleet-agent so that systemd's final kill at
// shutdown spares it. It subscribes to the nbd netlink multicast group; when
// the kernel reports NBD_CMD_LINK_DEAD for our device, it dials and
// handshakes again and gives the kernel the new socket with
// NBD_CMD_RECONFIGURE. With several servers it fails over: it tries the
// server after the one that died first, round robin, pausing only after a
// round that reached none (failover.go). It prints the reconnect time to
// the console and /dev/kmsg and reports it as the milestone
// nbd-reconnected-<ms>ms to the server it moved to. Requests issued meanwhile wait in the kernel for up
// to the dead-connection timeout (bootfleet.nbd.dead=SECONDS, default 120)
// and then fail with EIO. Requests that were in flight when the link died
// are resent once their per-request timeout (bootfleet.nbd.timeout=SECONDS,
// default 10) expires; that timeout also turns a silent server (no RST,
// e.g. a pulled cable on its side) into a dead link.
//
// Root proxy (proxy_linux.go, internal/rootproxy): with bootfleet.proxy=1,
// or whenever the server names a multicast group (bootfleet.mcast=), the
// kernel does not hold a socket to a server. In step 4 the agent starts a
// copy of itself as "@bootfleet-agent proxy" (spared by systemd's final
// kill like the watcher), which dials the servers, and runs the handshake
// with it over a unix socket pair; step 5 hands the kernel its end. The
// proxy answers reads of the base from a read cache in RAM
// (bootfleet.readcache=SIZE|N%|0, default 10% of RAM), filled from the
// content's multicast group or by unicast, and reads of written blocks
// (this boot's, and a server-side overlay's from bootfleet.overlay.blocks=)
// and every write from the servers, failing over between them itself, so
// no watcher runs. It reports its counters as the milestone root-io. The
// proxy locks its memory and sets PR_SET_IO_FLUSHER (HardenForIO).
// bootfleet.proxy=0 keeps the direct path even with a group.
//
// Client-side write caches: with bootfleet.overlay=client-ram or
// client-disk the server exports the image read-only, and in step 6,
// between finding the root and mounting it, the agent builds a
// device-mapper snapshot (dm-snapshot, with a transient exception store)
// over the root's block device and mounts that.
// The cache is a brd RAM disk (client-ram; bootfleet.cache.size=, default
// 25% of RAM) or the local disk bootfleet.cache= names, whose blocks are
// discarded at every boot (client-disk). A snapshot, not an overlayfs with
// a tmpfs upper layer, because it works under the file system: an ext4
// whose journal needs replay mounts (replay needs a writable device), the
// root's own fstab and remounts behave as on any disk, a write to a large
// file copies one 4 KiB chunk instead of the whole file, and it needs only
// modules the Debian kernel ships (dm_mod, dm_bufio, dm_snapshot, brd),
// driven by ioctls from the agent, no dmsetup. The price is how it fills:
// a full cache makes the kernel invalidate the snapshot and every I/O on
// the root fails, where a full tmpfs would give ENOSPC. So the agent
// starts a cache watcher (like the reconnect watcher, it survives
// switch_root) that reports the fill level at 50, 80 and 95% and, on
// overflow, says so on the console, in the kernel log at emergency level
// and to the server (milestone agent-cache-full). A cache device that is
// missing or smaller than 64 MiB stops the boot (BOOTFLEET-FAIL and the
// milestone agent-cache-refused); the writes never go elsewhere.
//
// The network configuration is left in place for the new root, and the
// hand-off files tell systemd-networkd, udev and NetworkManager to leave it
// alone: the root disk lives on that NIC until the machine is off.
//
// The agent prints "bootfleet-agent: " log lines and BOOTFLEET-* markers to
// the console, which test/e2e watches:
//
//	BOOTFLEET-AGENT: <kernel release>   the agent started
//	BOOTFLEET-CMDLINE: <cmdline>        the kernel command line
//	BOOTFLEET-IP: <addr> ...            DHCP bound (printed by the udhcpc script),
//	                                    or the IPv6 address SLAAC gave
//	BOOTFLEET-NBD: <dev> size=N ...     the kernel accepted the NBD socket
//	BOOTFLEET-IDENTITY: hostname=<name> machine-id=<id> ssh-host-keys=<n> files=<n> sshd=<bool>
//	                                    the machine's identity is in the new root
//	BOOTFLEET-SWITCHROOT: <init>        about to exec switch_root
//	BOOTFLEET-NBD-RECONNECTED: <dev> server=<addr> from=<addr> after=<s> ...
//	                                    the watcher replaced a dead socket
//	BOOTFLEET-WATCHER-STOPPED: <signal> the watcher was killed (it should never be)
//	BOOTFLEET-PROXY-STOPPED: <signal>   the root proxy was killed (it should never be)
//	BOOTFLEET-CACHE: <mode> <dev> on <cache> cache=<MiB> over <root>
//	                                    the write cache is built
//	BOOTFLEET-CACHE-FILL: <n>% ...      the write cache is filling
//	BOOTFLEET-CACHE-FULL: ...           the write cache overflowed; the root fails
//	BOOTFLEET-FAIL: <why>               the agent gave up; it powers off
//
// The pure parts (command line parsing, the NBD client handshake, the
// generic netlink message codec) build on every OS and are unit tested; the
// boot itself is Linux only and is proven by test/e2e.
package agent
