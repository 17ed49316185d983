#!/usr/bin/env bash
# arm64.sh OUTDIR: fetches what ARM64 machines boot through grub and leaves it in OUTDIR:
#
# OUTDIR/shimaa64.efi.signed       from shim-signed:arm64, signed by Microsoft's UEFI CA
# OUTDIR/grubnetaa64.efi.signed    from grub-efi-arm64-signed:arm64, the network grub, signed by Debian
# OUTDIR/grubaa64.efi.signed       from the same package, the grub that reads its config from its own
#                                  device: UEFI HTTP Boot's disk image holds it
# OUTDIR/busybox                   static arm64 busybox (busybox-static:arm64), for arm64 initramfs
#                                  builds and root images
# OUTDIR/image/vmlinuz             Debian's signed arm64 kernel (what linux-image-arm64 depends on;
#                                  its .deb stays in BOOTFLEET_CACHE/debs for initramfs builds)
# OUTDIR/image/initrd.img          the e2e test initrd (scripts/mkimage.sh) with arm64 busybox
#
# Point bootfleet's secure_boot.shim_arm64, secure_boot.grub_arm64 and secure_boot.grub_arm64_disk
# at the first three. The
# packages are downloaded (apt-get download), never installed. The first run adds the arm64
# architecture to dpkg (dpkg --add-architecture arm64) and runs apt-get update, so apt knows
# the arm64 packages; that needs root. Downloaded .debs are kept in BOOTFLEET_CACHE (default
# /var/cache/bootfleet-e2e).
set -euo pipefail

out=${1:?usage: arm64.sh OUTDIR}
cache=${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}
debs=$cache/debs
mkdir -p "$out" "$debs"

log() { echo "arm64: $*" >&2; }
die() { echo "arm64: error: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (package dpkg)"

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  [ "$(id -u)" = 0 ] || die "dpkg does not know arm64; run as root once, or run dpkg --add-architecture arm64 && apt-get update"
  log "adding the arm64 architecture to dpkg (packages are downloaded, never installed)"
  dpkg --add-architecture arm64
  apt-get -o DPkg::Lock::Timeout=900 update -q >&2
fi

(
  exec 9>"$cache/.lock"
  flock 9
  . "$(dirname "$0")/aptcache.sh"
  work=$(mktemp -d "${TMPDIR:-/tmp}/bf-arm64.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  dpkg-deb -x "$(fetch shim-signed:arm64)" "$work"
  dpkg-deb -x "$(fetch grub-efi-arm64-signed:arm64)" "$work"
  dpkg-deb -x "$(fetch busybox-static:arm64)" "$work"
  for f in usr/lib/shim/shimaa64.efi.signed usr/lib/grub/arm64-efi-signed/grubnetaa64.efi.signed \
      usr/lib/grub/arm64-efi-signed/grubaa64.efi.signed; do
    [ -s "$work/$f" ] || die "the package has no $f"
    install -m 644 "$work/$f" "$out/"
  done
  install -m 755 "$work/bin/busybox" "$out/busybox"
  log "in $out: shimaa64.efi.signed grubnetaa64.efi.signed grubaa64.efi.signed busybox"
)
BOOTFLEET_ARCH=arm64 "$(dirname "$0")/mkimage.sh" "$out/image"
