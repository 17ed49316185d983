#!/usr/bin/env bash
# mkdeb.sh [OUTDIR]: builds the Debian package of bootfleet from bin/ (make
# build) into OUTDIR (default dist/): the server and its static agent in
# /usr/lib/bootfleet (bootfleet finds the agent next to itself) with
# /usr/bin/bootfleet pointing there, the systemd unit, the example config as
# a conffile, README.Debian. `make deb` runs it. No root needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
for b in bin/bootfleet bin/bootfleet-agent; do
  [ -x "$b" ] || { echo "mkdeb.sh: $b missing; run make build" >&2; exit 1; }
done
# A release tag (v1.2.3, stamped without the v) is the package version; any
# other build is 0~g<what git describe said>, which sorts below every release.
version=$(bin/bootfleet version --short 2>/dev/null || echo dev)
case "$version" in
  [0-9]*.*) ;;
  *) version="0~g$version" ;;
esac
version=${version//-/+}

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"
install -D -m 0755 bin/bootfleet "$root/usr/lib/bootfleet/bootfleet"
install -D -m 0755 bin/bootfleet-agent "$root/usr/lib/bootfleet/bootfleet-agent"
install -d "$root/usr/bin"
ln -s ../lib/bootfleet/bootfleet "$root/usr/bin/bootfleet"
install -D -m 0644 packaging/deb/bootfleet.service "$root/lib/systemd/system/bootfleet.service"
install -D -m 0644 examples/bootfleet.yaml "$root/etc/bootfleet/bootfleet.yaml"
install -D -m 0644 packaging/deb/README.Debian "$root/usr/share/doc/bootfleet/README.Debian"
install -D -m 0644 README.md "$root/usr/share/doc/bootfleet/README.md"
install -d "$root/DEBIAN"
for s in postinst prerm postrm; do install -m 0755 "packaging/deb/$s" "$root/DEBIAN/$s"; done
echo /etc/bootfleet/bootfleet.yaml >"$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@SIZE@/$size/" packaging/deb/control.in >"$root/DEBIAN/control"

mkdir -p "$out"
deb="$out/bootfleet_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
