#!/usr/bin/env bash
# bench.sh [bench flags]: installs the peer servers the benchmarks compare
# bootfleet with, then runs bench (see bench/doc.go), which writes
# BENCHMARKS.md and bench/results/*.png. `make bench` runs it after
# `make deps build`. Needs root. Examples:
#   scripts/bench.sh                  full run (about 30 minutes on 2 cores; the case 3
#                                     storms are half of it: -kernel-mib 20 halves them)
#   scripts/bench.sh -quick           smoke run with small files
#   scripts/bench.sh -cases 1,4 -runs 5
#
# Bench-only packages are installed here, not in scripts/deps.sh, so that
# `make test` does not pull in nginx and atftpd. tftpd-hpa conflicts with
# atftpd (both provide tftpd), so its in.tftpd is taken out of the .deb
# without installing it.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "bench.sh: needs root (namespaces, tc, nft)" >&2; exit 1; }

cache=${BOOTFLEET_BENCH_CACHE:-/var/cache/bootfleet-bench}
mkdir -p "$cache"
export DEBIAN_FRONTEND=noninteractive

missing=""
for p in nginx-light atftpd atftp curl dnsmasq nftables iproute2; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  apt-get -o DPkg::Lock::Timeout=900 update -q
  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing
fi
# Installing nginx or dnsmasq may start a system instance on a machine with
# systemd; bench runs its own in private namespaces, so those do not collide.

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

[ -x bin/bootfleet ] || echo "bench.sh: bin/bootfleet missing (run make build); measuring the peers only" >&2
go build -o bin/bench ./bench
exec bin/bench -tftpd-hpa "$hpa" -bootfleet bin/bootfleet "$@"
