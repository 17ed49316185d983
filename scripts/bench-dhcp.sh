#!/usr/bin/env bash
# bench-dhcp.sh [dhcpbench flags]: DHCP DORA rate of bootfleet (SQLite and
# PostgreSQL stores), Kea memfile and dnsmasq, measured with Kea's perfdhcp
# in private namespaces; writes BENCHMARKS-dhcp.md. Needs root. About 4
# minutes with the defaults. Examples:
#   scripts/bench-dhcp.sh
#   scripts/bench-dhcp.sh -rates 3000 -runs 1 -servers bootfleet-sqlite,kea
#   scripts/bench-dhcp.sh -keep          # keep logs, lease stores, perfdhcp output
#
# Bench-only packages are installed here, not in scripts/deps.sh, so that
# `make test` does not pull in Kea. PostgreSQL comes from scripts/pg-test.sh.
# Installing kea-dhcp4-server or dnsmasq may start a system instance on a
# machine with systemd; the bench runs its own in private namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "bench-dhcp.sh: needs root (namespaces, port 67)" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
missing=""
for p in kea-admin kea-dhcp4-server dnsmasq postgresql iproute2 util-linux; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing ||
    { apt-get -o DPkg::Lock::Timeout=900 update -q &&
      apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing; }
fi

[ -x bin/bootfleet ] || go build -trimpath -o bin/bootfleet ./cmd/bootfleet
go build -o bin/dhcpbench ./bench/dhcpbench
exec bin/dhcpbench -bootfleet bin/bootfleet -pgtest scripts/pg-test.sh -out BENCHMARKS-dhcp.md "$@"
