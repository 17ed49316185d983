#!/usr/bin/env bash
# Regenerates the DHCP captures from real firmware that the golden tests replay.
#
# Each scenario boots one QEMU VM (-accel tcg, one at a time, bounded by
# timeout) on a bridge inside a private network namespace. dnsmasq serves DHCP
# in that namespace so the firmware gets far enough to send REQUESTs as well as
# DISCOVERs; tshark writes everything on ports 67/68/4011 to a pcap.
#
#   ovmf-pxe.pcap   OVMF's own PXE client (virtio-net-pci with romfile= so EDK II's
#                   virtio driver runs PXE), then whatever OVMF tries next
#                   (HTTP boot: option 60 HTTPClient) once TFTP fails.
#   ipxe-efi.pcap   Debian's ipxe.efi started from a FAT drive under OVMF.
#   ipxe-bios.pcap  SeaBIOS with QEMU's iPXE NIC ROM (ipxe-qemu), -boot n.
#   ovmf-proxy.pcap interop: OVMF PXE against bootfleet's proxyDHCP (testdata/bfdhcp)
#                   while dnsmasq hands out addresses only and serves ipxe.efi
#                   over TFTP; then the chained ipxe.efi's own DHCP.
#   ovmf-full.pcap  interop: OVMF PXE against bootfleet in full mode (dnsmasq
#                   serves TFTP only), then the chained ipxe.efi.
#
# The interop scenarios print the firmware's serial console and bootfleet's
# log to OUT/NAME.serial and OUT/NAME.bfdhcp.log; the TFTP read of ipxe.efi in
# NAME.dnsmasq.log proves the firmware accepted our offer.
#
# Usage (root): internal/dhcp/testdata/capture.sh [scenario...]
# Needs: qemu-system-x86 ovmf ipxe ipxe-qemu dnsmasq tshark iproute2.
# Then run `UPDATE_TESTDATA=1 go test ./internal/dhcp/` to refresh the golden
# replies and the fuzz seed corpus.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/captures}
ns=bf-cap-$$
work=$(mktemp -d /tmp/bf-capture.XXXXXX)
mkdir -p "$out"
chmod 0755 "$work" # dnsmasq drops to nobody and must read the TFTP root

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns"
# Background jobs start with `ip netns exec` itself (not through nsx), so $!
# is the daemon's own pid: ip execs into it, and kill reaches it.
nsx() { ip netns exec "$ns" "$@"; }
nsx ip link set lo up
nsx ip link add br0 type bridge
nsx ip addr add 10.213.7.1/24 dev br0
nsx ip link set br0 up

# Boot files: a missing one for OVMF (so it moves on to HTTP boot), a URL that
# does not resolve for iPXE (so it stops after its DHCP exchange).
mkdir -p "$work/tftp"
cat >"$work/dnsmasq.conf" <<EOF
port=0
user=root
interface=br0
bind-interfaces
dhcp-range=10.213.7.100,10.213.7.150,1h
dhcp-option=option:router,10.213.7.1
enable-tftp
tftp-root=$work/tftp
log-dhcp
dhcp-userclass=set:ipxe,iPXE
dhcp-boot=tag:ipxe,http://10.213.7.1:1/none.ipxe
dhcp-boot=tag:!ipxe,missing.efi,,10.213.7.1
dhcp-leasefile=$work/leases
EOF

# Addresses (and TFTP) from dnsmasq, boot options from bootfleet's proxy.
sed -e '/^dhcp-boot=/d' -e '/^dhcp-userclass=/d' "$work/dnsmasq.conf" >"$work/dnsmasq-addr.conf"
# TFTP only: no dhcp-range, so dnsmasq does no DHCP at all.
grep -v -e '^dhcp-' -e '^log-dhcp' "$work/dnsmasq.conf" >"$work/dnsmasq-tftp.conf"
conf=$work/dnsmasq.conf
bf_args=()

# run_vm NAME SECONDS QEMU-ARGS... : capture while one VM runs, then stop all.
# Uses $conf for dnsmasq and, when bf_args is set, runs bfdhcp with them.
run_vm() {
	local name=$1 secs=$2 bf=""
	shift 2
	nsx ip tuntap add tap0 mode tap
	nsx ip link set tap0 master br0
	nsx ip link set tap0 up
	: >"$work/leases"
	ip netns exec "$ns" dnsmasq --keep-in-foreground --conf-file="$conf" \
		--pid-file="$work/dnsmasq.pid" --log-facility="$work/$name.dnsmasq.log" &
	pids+=($!)
	local dns=$!
	ip netns exec "$ns" tshark -q -F pcap -i br0 -f 'udp port 67 or udp port 68 or udp port 4011' \
		-a duration:"$((secs + 5))" -w "$work/$name.pcap" 2>/dev/null &
	pids+=($!)
	local ts=$!
	if [ ${#bf_args[@]} -gt 0 ]; then
		ip netns exec "$ns" "$work/bfdhcp" -iface br0 -http http://10.213.7.1:8080 "${bf_args[@]}" 2>"$out/$name.bfdhcp.log" &
		pids+=($!)
		bf=$!
	fi
	sleep 2
	echo "capture $name: booting VM for ${secs}s" >&2
	nsx timeout --kill-after=5 "$secs" qemu-system-x86_64 -accel tcg -m 256 \
		-display none -serial "file:$work/$name.serial" -no-reboot \
		-netdev tap,id=n0,ifname=tap0,script=no,downscript=no "$@" || true
	wait "$ts" || true
	kill "$dns" $bf 2>/dev/null || true
	wait "$dns" $bf 2>/dev/null || true
	cp "$work/$name.serial" "$out/$name.serial" 2>/dev/null || true
	nsx ip link del tap0
	cp "$work/$name.pcap" "$out/$name.pcap"
	cp "$work/$name.dnsmasq.log" "$out/$name.dnsmasq.log" 2>/dev/null && chmod 0644 "$out/$name.dnsmasq.log" || true
	chmod 0644 "$out/$name.pcap"
	echo "capture $name: $(tshark -r "$out/$name.pcap" 2>/dev/null | wc -l) packets" >&2
}

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(ovmf-pxe ipxe-efi ipxe-bios ovmf-proxy ovmf-full)
for s in "${scenarios[@]}"; do
	case $s in
	ovmf-pxe)
		cp /usr/share/ovmf/OVMF.fd "$work/ovmf-pxe.fd"
		run_vm ovmf-pxe 150 -bios "$work/ovmf-pxe.fd" \
			-device virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:07:00:01
		;;
	ipxe-efi)
		cp /usr/share/ovmf/OVMF.fd "$work/ipxe-efi.fd"
		mkdir -p "$work/esp/EFI/BOOT"
		cp /usr/lib/ipxe/ipxe.efi "$work/esp/EFI/BOOT/BOOTX64.EFI"
		run_vm ipxe-efi 90 -bios "$work/ipxe-efi.fd" \
			-drive file=fat:rw:"$work/esp",format=raw \
			-device virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:07:00:02
		;;
	ovmf-proxy | ovmf-full)
		[ -x "$work/bfdhcp" ] || (cd "$here/../../.." && go build -o "$work/bfdhcp" ./internal/dhcp/testdata/bfdhcp)
		cp /usr/lib/ipxe/ipxe.efi "$work/tftp/ipxe.efi"
		cp /usr/share/ovmf/OVMF.fd "$work/$s.fd"
		if [ "$s" = ovmf-proxy ]; then
			conf=$work/dnsmasq-addr.conf bf_args=(-mode proxy)
		else
			conf=$work/dnsmasq-tftp.conf bf_args=(-mode full -range 10.213.7.160-10.213.7.170 -leases "$work/leases.json")
		fi
		run_vm "$s" 120 -bios "$work/$s.fd" \
			-device virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:07:00:04
		conf=$work/dnsmasq.conf bf_args=()
		rm -f "$work/tftp/ipxe.efi"
		;;
	ipxe-bios)
		run_vm ipxe-bios 45 -boot n \
			-device virtio-net-pci,netdev=n0,mac=52:54:00:07:00:03
		;;
	*)
		echo "unknown scenario $s (want ovmf-pxe, ipxe-efi, ipxe-bios, ovmf-proxy or ovmf-full)" >&2
		exit 2
		;;
	esac
done
