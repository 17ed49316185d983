#!/usr/bin/env bash
# bench-deps.sh: installs the peer servers and client tools the benchmarks
# compare bootfleet with, and builds bin/bench (see bench/harness). `make
# bench` and every `make bench-*` run it first. Needs root.
#
# Bench-only packages are installed here, not in scripts/deps.sh, so that
# `make test` does not pull in nginx, Kea or fio. tftpd-hpa conflicts with
# atftpd (both provide tftpd), so its in.tftpd is taken out of the .deb
# without installing it. Installing nginx, dnsmasq or Kea may start a system
# instance on a machine with systemd; the benches run their own in private
# namespaces, so those do not collide.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "bench-deps.sh: needs root (apt-get; the benches need namespaces, tc and nft)" >&2; exit 1; }

cache=${BOOTFLEET_BENCH_CACHE:-/var/cache/bootfleet-bench}
mkdir -p "$cache"
export DEBIAN_FRONTEND=noninteractive

apt_install() {
  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@" ||
    { apt-get -o DPkg::Lock::Timeout=900 update -q &&
      apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@"; }
}

missing=""
for p in nginx-light atftpd atftp curl dnsmasq nftables iproute2 util-linux \
  kea-admin kea-dhcp4-server postgresql \
  nbd-server nbdkit fio qemu-utils libnbd-bin; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "bench-deps.sh: this fio has no nbd engine" >&2; exit 1; }

hpa=$cache/tftpd-hpa/usr/sbin/in.tftpd
if [ ! -x "$hpa" ]; then
  deb=$(ls -1 "$cache"/tftpd-hpa_*.deb 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$deb" ]; then
    (cd "$cache" && apt-get -q -o APT::Sandbox::User=root download tftpd-hpa) ||
      { apt-get -o DPkg::Lock::Timeout=900 update -q && (cd "$cache" && apt-get -q -o APT::Sandbox::User=root download tftpd-hpa); }
    deb=$(ls -1 "$cache"/tftpd-hpa_*.deb | sort -V | tail -n1)
  fi
  rm -rf "$cache/tftpd-hpa"
  dpkg-deb -x "$deb" "$cache/tftpd-hpa"
fi

(cd bench && go build -o ../bin/bench ./cmd/bench)
