#!/usr/bin/env bash
# mkimage.sh OUTDIR: builds the tiny Linux that end-to-end test VMs and `make demo` boot.
#
# OUTDIR/vmlinuz     Debian's own kernel (the versioned package linux-image-ARCH depends on)
# OUTDIR/initrd.img  gzip'd newc cpio: static busybox, the virtio NIC modules and an /init that
#                    takes DHCP on eth0, prints "BOOTFLEET-CMDLINE: <cmdline>", fetches the URL
#                    given as done=URL on the kernel command line, prints "BOOTFLEET-DONE" and
#                    powers off. On any failure it prints "BOOTFLEET-FAIL: <why>" and powers off,
#                    so a test fails in seconds instead of waiting for its timeout.
#
# Needs only Debian's apt (no other network). Downloaded .debs are kept in BOOTFLEET_CACHE
# (default /var/cache/bootfleet-e2e) so reruns are offline and fast. Idempotent: when the
# inputs have not changed, OUTDIR is left alone. The initrd is reproducible (fixed mtimes,
# gzip -n), so two builds from the same inputs are byte-identical.
#
# Environment:
#   BOOTFLEET_CACHE        cache directory (default /var/cache/bootfleet-e2e)
#   BOOTFLEET_KERNEL_PKG   kernel package to use (default: what linux-image-ARCH depends on)
#   BOOTFLEET_ARCH         Debian architecture of the kernel and busybox (default amd64; arm64
#                          needs `dpkg --add-architecture arm64` and apt-get update, which
#                          scripts/arm64.sh does)
set -euo pipefail

out=${1:?usage: mkimage.sh OUTDIR}
cache=${BOOTFLEET_CACHE:-/var/cache/bootfleet-e2e}
debs=$cache/debs
mkdir -p "$out" "$debs"
out=$(cd "$out" && pwd)
arch=${BOOTFLEET_ARCH:-amd64}
# A foreign architecture's packages are named PKG:ARCH.
q=""
[ "$arch" = "$(dpkg --print-architecture)" ] || q=":$arch"

log() { echo "mkimage: $*" >&2; }
die() { echo "mkimage: error: $*" >&2; exit 1; }

for tool in dpkg-deb cpio gzip modinfo; do
  command -v "$tool" >/dev/null || die "$tool not found; run scripts/deps.sh (packages dpkg, cpio, gzip, kmod)"
done

# Concurrent callers (a test run and `make demo`) share the cache; serialise them.
exec 9>"$cache/.lock"
flock 9

. "$(dirname "$0")/aptcache.sh"

# linux-image-ARCH is a metapackage; the kernel lives in the versioned package it depends on.
resolve_kernel() {
  apt-cache depends "linux-image-$arch$q" 2>/dev/null | sed -n "s/^ *|\{0,1\}Depends: \(linux-image-[0-9][^ :]*-$arch\)\(:$arch\)\{0,1\}\$/\1/p" | head -n1
}
kpkg=${BOOTFLEET_KERNEL_PKG:-}
if [ -z "$kpkg" ]; then
  kpkg=$(resolve_kernel) || true
fi
if [ -z "$kpkg" ] && ! ls "$debs"/linux-image-[0-9]*-"$arch"_*.deb >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # A fresh CI image may ship without apt lists; fetch them once rather than fail.
  log "apt does not know linux-image-$arch; running apt-get update"
  apt-get -o DPkg::Lock::Timeout=900 update -q >&2 || true
  kpkg=$(resolve_kernel) || true
fi
if [ -z "$kpkg" ]; then
  kpkg=$(ls -1 "$debs"/linux-image-[0-9]*-"$arch"_*.deb 2>/dev/null | sort -V | tail -n1 | sed 's|.*/||; s|_.*||') || true
fi
[ -n "$kpkg" ] || die "cannot resolve the kernel package: apt-cache depends linux-image-$arch gave nothing and no kernel .deb is cached in $debs"

kdeb=$(fetch "${kpkg%%:*}$q")
bdeb=$(fetch "busybox-static$q")

# Skip the rebuild when the inputs are the ones that built OUTDIR.
stamp="$(basename "$kdeb") $(basename "$bdeb") $(sha256sum "$0" | cut -c1-16)"
if [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "up to date: $out ($stamp)"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bf-mkimage.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "extracting $(basename "$kdeb")"
dpkg-deb -x "$kdeb" "$work/kernel"
dpkg-deb -x "$bdeb" "$work/busybox"

kver=$(ls -1 "$work/kernel/lib/modules" | head -n1)
[ -n "$kver" ] || die "$(basename "$kdeb") has no lib/modules/<version>; is $kpkg a kernel image package?"
vmlinuz=$work/kernel/boot/vmlinuz-$kver
[ -s "$vmlinuz" ] || die "$(basename "$kdeb") has no boot/vmlinuz-$kver"
mdir=$work/kernel/lib/modules/$kver

root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc/udhcpc,proc,sys,dev,tmp,run,lib/modules}
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
# A foreign busybox cannot run here; the host's (same Debian release) lists the same applets.
lister="$root/bin/busybox"
[ -z "$q" ] || lister=/bin/busybox
for applet in $("$lister" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done

# Module load order: each wanted module after its dependencies, skipping built-ins. Names
# come from modinfo so a kernel that renames, merges or builds in a module still works.
declare -A seen=()
order=()
modfile() { find "$mdir/kernel" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" -o -name "$1.ko.gz" | head -n1; }
addmod() {
  local name=${1//-/_} f dep
  [ -z "${seen[$name]:-}" ] || return 0
  seen[$name]=1
  if grep -qE "/${name//_/[-_]}\.ko$" "$mdir/modules.builtin" 2>/dev/null; then
    return 0
  fi
  f=$(modfile "$name"); [ -n "$f" ] || f=$(modfile "${name//_/-}")
  [ -n "$f" ] || die "module $name is neither built into $kver nor shipped as a .ko"
  for dep in $(modinfo -F depends "$f" | tr ',' ' '); do addmod "$dep"; done
  case $f in
    *.xz) xz -dc "$f" ;;
    *.zst) zstd -dc "$f" ;;
    *.gz) gzip -dc "$f" ;;
    *) cat "$f" ;;
  esac >"$root/lib/modules/$name.ko"
  order+=("$name")
}
for m in virtio_pci virtio_net; do addmod "$m"; done
printf '%s\n' "${order[@]}" >"$root/etc/modules"
log "kernel $kver, modules: ${order[*]}"

# The same udhcpc hook the initramfs builder embeds.
install -m 755 "$(dirname "$0")/../internal/initramfs/udhcpc.script" "$root/etc/udhcpc/default.script"

cat >"$root/init" <<'EOF'
#!/bin/sh
# Test VM init: network up, report the command line, call the DoneURL, power off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# The cpio may lack /dev/console (built without root); reattach to it now that /dev exists.
[ -c /dev/console ] && exec </dev/console >/dev/console 2>&1

fail() {
  echo "BOOTFLEET-FAIL: $*"
  sleep 1
  poweroff -f
}

echo "BOOTFLEET-INIT: $(uname -r)"
echo "BOOTFLEET-CMDLINE: $(cat /proc/cmdline)"
for m in $(cat /etc/modules); do
  insmod "/lib/modules/$m.ko" || fail "insmod $m"
done

i=0
while [ ! -e /sys/class/net/eth0 ]; do
  i=$((i + 1))
  [ $i -le 100 ] || fail "no eth0 after 10s; modules: $(cat /etc/modules)"
  sleep 0.1
done
ip link set lo up
ip link set eth0 up

url=""
for w in $(cat /proc/cmdline); do
  case "$w" in done=*) url=${w#done=} ;; esac
done
[ -n "$url" ] || fail "no done=URL on the kernel command line"

case "$url" in
http://\[*)
  # An IPv6 server: the kernel configures eth0 from the router advertisement's prefix.
  i=0
  until addr=$(ip -6 addr show dev eth0 scope global | sed -n 's/.*inet6 \([^ ]*\).*/\1/p' | head -n1) && [ -n "$addr" ]; do
    i=$((i + 1))
    [ $i -le 300 ] || fail "no global IPv6 address on eth0 after 30s (no router advertisement with a prefix?)"
    sleep 0.1
  done
  echo "BOOTFLEET-IP: $addr"
  ;;
*)
  udhcpc -i eth0 -s /etc/udhcpc/default.script -f -q -n -t 10 -T 2 -A 1 || fail "no DHCP lease on eth0"
  ;;
esac

n=0
# Not wget -T: Debian 12's static busybox wget segfaults with it; bound the attempt with timeout instead.
until timeout 15 wget -q -O /tmp/done "$url"; do
  n=$((n + 1))
  [ $n -lt 5 ] || fail "GET $url failed 5 times"
  sleep 2
done
echo "BOOTFLEET-DONE $url"
sleep 1
poweroff -f
EOF
chmod 755 "$root/init"

# /dev/console lets the kernel give /init a stdout before devtmpfs is mounted; it needs root.
mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true

find "$root" -exec touch -h -d @0 {} +
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 --reproducible) | gzip -9 -n >"$work/initrd.img"

cp "$vmlinuz" "$out/.vmlinuz.tmp"
mv "$out/.vmlinuz.tmp" "$out/vmlinuz"
cp "$work/initrd.img" "$out/.initrd.img.tmp"
mv "$out/.initrd.img.tmp" "$out/initrd.img"
echo "$stamp" >"$out/.stamp"
log "wrote $out/vmlinuz ($(stat -c %s "$out/vmlinuz") bytes) and $out/initrd.img ($(stat -c %s "$out/initrd.img") bytes)"
