#!/usr/bin/env bash
# Makes a Debian 12 disk image for a bootfleet diskless root, as an image
# author would: a stock debootstrap root with systemd, systemd-networkd
# doing DHCP on every wired NIC, and the distribution's own kernel.
#
#   scripts/mkdebian.sh [--arch amd64|arm64] [--fs ext4|xfs|btrfs]
#                       [--table gpt|mbr|none] [--size 2G] [--add DIR]
#                       [--packages P,Q] [--user NAME] OUT.raw
#
# --arch arm64: an arm64 root (linux-image-arm64) made on an amd64 machine:
#   debootstrap runs the root's arm64 programs through qemu-aarch64-static
#   (package qemu-user-static), which this script registers with
#   binfmt_misc if it is not registered yet. Default: amd64.
# --table gpt: an EFI system partition, then the root with the root type
#   GUID of the Discoverable Partitions Specification for the architecture
#   (a cloud image's layout); mbr: a swap partition, then the root as type
#   83 (an older PC's); none: the file system alone.
# --add DIR: files copied over the root before the file system is made.
# --packages P,Q: more Debian packages in the root (openssh-server, say);
#   the tree with them is cached apart, so images without them keep theirs.
# --user NAME: a login user NAME with a home and a locked password, for a
#   desktop's autologin (root cannot autologin through lightdm's PAM); made
#   after the cached tree is unpacked, so the cache does not depend on it.
#
# The debootstrap tree is cached as a tarball (BOOTFLEET_CACHE, default
# /var/cache/bootfleet-e2e), so a machine fetches the packages once. The
# mirror is the one apt on this machine uses. Needs root, debootstrap,
# fdisk (sfdisk), e2fsprogs, xfsprogs, btrfs-progs and dosfstools.
set -euo pipefail

arch=amd64 fs=ext4 table=gpt size=2G add="" extra="" user=""
while [ $# -gt 1 ]; do
  case "$1" in
  --arch) arch=$2; shift 2 ;;
  --fs) fs=$2; shift 2 ;;
  --table) table=$2; shift 2 ;;
  --size) size=$2; shift 2 ;;
  --add) add=$2; shift 2 ;;
  --packages) extra=$2; shift 2 ;;
  --user) user=$2; shift 2 ;;
  *) echo "mkdebian: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--arch amd64|arm64] [--fs ext4|xfs|btrfs] [--table gpt|mbr|none] [--size 2G] [--add DIR] [--packages P,Q] [--user NAME] OUT.raw" >&2; exit 2; }
case "$user" in *[!a-z0-9_-]*|[!a-z_]*) echo "mkdebian: --user $user: want a lower-case login name (a-z, 0-9, _ and -, not starting with a digit)" >&2; exit 2 ;; esac
case "$extra" in *[!a-z0-9.+,-]*) echo "mkdebian: --packages $extra: want Debian package names separated by commas" >&2; exit 2 ;; esac
out=$1
# The DPS root partition type for the architecture.
case "$arch" in
amd64) roottype=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709 ;;
arm64) roottype=B921B045-1DF0-41C3-AF44-4C6F280D3FAE ;;
*) echo "mkdebian: --arch $arch: want amd64 or arm64" >&2; exit 2 ;;
esac
case "$fs" in ext4|xfs|btrfs) ;; *) echo "mkdebian: --fs $fs: want ext4, xfs or btrfs" >&2; exit 2 ;; esac
case "$table" in gpt|mbr|none) ;; *) echo "mkdebian: --table $table: want gpt, mbr or none" >&2; exit 2 ;; esac

cache=${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}
packages="systemd-sysv,udev,iproute2,linux-image-$arch${extra:+,$extra}"
# The cache key covers everything that shapes the tree; amd64 keys stay
# what they were before --arch, so existing caches stay valid.
key=$(printf '%s\n' "$packages" "$(sed -n '/^# tree:/,/^# end tree/p' "$0")" | sha256sum | cut -c1-16)
tarball="$cache/debian-bookworm-$key.tar"
[ "$arch" = amd64 ] || tarball="$cache/debian-bookworm-$arch-$key.tar"

# mirror prints the Debian mirror apt is configured with here.
mirror() {
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '$2 !~ /security/ {print $2; exit}')
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list | awk '$2 !~ /security/ {print $2; exit}')
  [ -n "$m" ] || { echo "mkdebian: no Debian mirror in apt's sources" >&2; exit 1; }
  echo "$m"
}

work=$(mktemp -d /var/tmp/mkdebian.XXXXXX)
cleanup() {
  mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
  rm -rf "$work"
}
trap cleanup EXIT

# foreign_exec makes sure this kernel runs arm64 programs (debootstrap's
# second stage and chroot below): qemu-aarch64-static registered with
# binfmt_misc with the F flag, so it works inside the chroot too.
foreign_exec() {
  local conf=/usr/lib/binfmt.d/qemu-aarch64.conf bm=/proc/sys/fs/binfmt_misc
  [ "$(dpkg --print-architecture)" != arm64 ] || return 0
  [ -s "$conf" ] || { echo "mkdebian: --arch arm64 on $(dpkg --print-architecture) needs qemu-aarch64-static: install qemu-user-static (scripts/deps.sh does)" >&2; exit 1; }
  [ -e "$bm/register" ] || mount -t binfmt_misc binfmt_misc "$bm" ||
    { echo "mkdebian: cannot mount binfmt_misc on $bm; --arch arm64 needs it to run arm64 programs under qemu-aarch64-static" >&2; exit 1; }
  [ -e "$bm/qemu-aarch64" ] || cat "$conf" >"$bm/register" 2>/dev/null || [ -e "$bm/qemu-aarch64" ] ||
    { echo "mkdebian: could not register $conf with binfmt_misc; register it (systemd-binfmt or update-binfmts) and run again" >&2; exit 1; }
  grep -qx enabled "$bm/qemu-aarch64" ||
    { echo "mkdebian: binfmt_misc has qemu-aarch64 disabled; enable it: echo 1 >$bm/qemu-aarch64" >&2; exit 1; }
}

# Tests build images side by side: one debootstraps the tree, the others
# wait for it rather than write the same tarball at once.
mkdir -p "$cache"
exec 8>"$tarball.lock"
flock 8
if [ ! -s "$tarball" ]; then
  [ "$arch" = amd64 ] || foreign_exec
  echo "mkdebian: debootstrap bookworm $arch ($packages); cached as $tarball" >&2
  debootstrap --arch="$arch" --variant=minbase --include="$packages" bookworm "$work/tree" "$(mirror)" >"$work/debootstrap.log" 2>&1 ||
    { tail -30 "$work/debootstrap.log" >&2; exit 1; }
  # tree: what an image author sets up; edits here change the cache key.
  echo bootfleet-client >"$work/tree/etc/hostname"
  : >"$work/tree/etc/machine-id"
  cat >"$work/tree/etc/systemd/network/20-wired.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
  chroot "$work/tree" systemctl enable systemd-networkd >/dev/null 2>&1
  chroot "$work/tree" passwd -d root >/dev/null
  rm -rf "$work/tree/var/cache/apt/archives/"*.deb "$work/tree/var/lib/apt/lists/"*
  # end tree
  tar --numeric-owner -C "$work/tree" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$work/tree"
fi
exec 8>&-

mkdir -p "$work/root"
tar --numeric-owner -C "$work/root" -xf "$tarball"
[ -z "$add" ] || cp -a "$add/." "$work/root/"
[ -z "$user" ] || chroot "$work/root" useradd --create-home --shell /bin/bash "$user"

mib=$(numfmt --from=iec "$size")
mib=$((mib / 1048576))
# Layout in MiB: the root starts at 34 (gpt) or 65 (mbr) and leaves 1 MiB
# at the end for the backup GPT.
case "$table" in
gpt) rootstart=34 ;;
mbr) rootstart=65 ;;
none) rootstart=0 ;;
esac
rootmib=$((mib - rootstart - (rootstart > 0 ? 1 : 0)))

fsimg="$work/root.fs"
truncate -s "${rootmib}M" "$fsimg"
case "$fs" in
ext4) mkfs.ext4 -q -F -L debroot -d "$work/root" "$fsimg" ;;
btrfs) mkfs.btrfs -q -f -L debroot --rootdir "$work/root" "$fsimg" >/dev/null ;;
xfs)
  # mkfs.xfs cannot fill a file system from a directory: copy through a loop mount.
  mkfs.xfs -q -f -L debroot "$fsimg"
  mkdir -p "$work/mnt"
  mount -o loop "$fsimg" "$work/mnt"
  cp -a "$work/root/." "$work/mnt/"
  umount "$work/mnt"
  ;;
esac
rm -rf "$work/root"

if [ "$table" = none ]; then
  mv "$fsimg" "$out"
  exit 0
fi
rm -f "$out"
truncate -s "${mib}M" "$out"
if [ "$table" = gpt ]; then
  sfdisk -q "$out" <<EOF
label: gpt
start=2048, size=$((32 * 2048)), type=U, name="EFI system"
start=$((rootstart * 2048)), size=$((rootmib * 2048)), type=$roottype, name="root"
EOF
  truncate -s 32M "$work/esp.fs"
  mkfs.fat -n ESP "$work/esp.fs" >/dev/null
  dd if="$work/esp.fs" of="$out" bs=1M seek=1 conv=notrunc,sparse status=none
else
  sfdisk -q "$out" <<EOF
label: dos
start=2048, size=$((64 * 2048)), type=82
start=$((rootstart * 2048)), size=$((rootmib * 2048)), type=83
EOF
  truncate -s 64M "$work/swap.img"
  mkswap -q "$work/swap.img"
  dd if="$work/swap.img" of="$out" bs=1M seek=1 conv=notrunc,sparse status=none
fi
dd if="$fsimg" of="$out" bs=1M seek="$rootstart" conv=notrunc,sparse status=none
