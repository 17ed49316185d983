#!/usr/bin/env bash
# Installs every Debian package the tests, demo and benchmarks need. Idempotent; run as root.
set -euo pipefail
PACKAGES="qemu-system-x86 gdb qemu-system-arm qemu-efi-aarch64 qemu-user-static qemu-utils ovmf ipxe ipxe-qemu busybox-static atftp tftp-hpa dnsmasq tshark iproute2 nftables curl cpio kmod xz-utils ca-certificates postgresql libnbd-bin chromium e2fsprogs nbdkit debootstrap fdisk xfsprogs btrfs-progs dosfstools mtools systemd adduser util-linux sqlite3 openssh-client openipmi systemd-boot-efi"
missing=""
for p in $PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=900 update -q
  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing
fi
# Debian's signed shim and grub for the Secure Boot tests: downloaded into the e2e cache
# (apt-get download), not installed, so this machine's own boot loader is left alone.
"$(dirname "$0")/secureboot.sh" "${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}/secureboot" ||
  echo "deps: could not fetch the signed boot chain now; the Secure Boot tests will try again" >&2
# The arm64 boot chain and test image for the ARM64 tests: dpkg learns the arm64
# architecture so apt can download (never install) shim-signed:arm64,
# grub-efi-arm64-signed:arm64, the arm64 kernel and busybox-static:arm64.
"$(dirname "$0")/arm64.sh" "${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}/arm64" ||
  echo "deps: could not fetch the arm64 boot chain now; the ARM64 tests will try again" >&2
