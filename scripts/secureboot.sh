#!/usr/bin/env bash
# secureboot.sh OUTDIR: fetches Debian's signed boot chain and leaves it in OUTDIR:
#
# OUTDIR/shimx64.efi.signed       from shim-signed: signed by Microsoft's UEFI CA, carries Debian's key
# OUTDIR/grubnetx64.efi.signed    from grub-efi-amd64-signed: the network grub, signed by Debian
#
# Point bootfleet's secure_boot.shim and secure_boot.grub at them. The packages are
# downloaded (apt-get download), never installed, so this machine's boot loader is not
# touched. Downloaded .debs are kept in BOOTFLEET_CACHE (default /var/cache/bootfleet-e2e).
set -euo pipefail

out=${1:?usage: secureboot.sh OUTDIR}
cache=${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}
debs=$cache/debs
mkdir -p "$out" "$debs"

log() { echo "secureboot: $*" >&2; }
die() { echo "secureboot: error: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (package dpkg)"

exec 9>"$cache/.lock"
flock 9
. "$(dirname "$0")/aptcache.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/bf-secureboot.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$(fetch shim-signed)" "$work"
dpkg-deb -x "$(fetch grub-efi-amd64-signed)" "$work"
for f in usr/lib/shim/shimx64.efi.signed usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed; do
  [ -s "$work/$f" ] || die "the package has no $f"
  install -m 644 "$work/$f" "$out/"
done
log "in $out: shimx64.efi.signed grubnetx64.efi.signed"
