package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestUEFIPXEv6Proxy: bootfleet in dhcp6 proxy mode next to dnsmasq, the
// site's DHCPv6 server and router, which hands out the addresses. OVMF's
// PXEv6 must take its address from dnsmasq and its boot file from
// bootfleet (an Advertise without IA_NA, then the Reply to its Request on
// port 4011), and bootfleet must never send an address: the capture of
// br0 is searched for an IA address in any DHCPv6 packet bootfleet sent.
//
// dnsmasq: addresses from fd00:213::100-1ff, router advertisements with
// M (DHCPv6 for addresses) and A (SLAAC, which the test VM's Linux uses),
// and, as the README says a site must in this mode, iPXE's script URL for
// user class iPXE, which ignores proxy answers.
func TestUEFIPXEv6Proxy(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN6(t)
	lan.addTap(t, "tap0")
	// br0 takes a SLAAC address from dnsmasq's advertisements beside
	// fd00:213::1, as a server on such a site would: TFTP must still
	// answer from fd00:213::1, the address asked, or EDK II drops the
	// reply (PXE-E18) and falls back to HTTP boot.
	site := lan.addPeer(t, "fd00:213::2/64")
	pcap := capture(t, lan, dir)
	dnsmasq := startDnsmasq6(t, site, dir)
	server := startBootfleetAt(t, e, lan, dir, ipv6OnlyConfig,
		map[string]string{"Data": filepath.Join(t.TempDir(), "data"), "Proxy": "yes"}, serverIP6)

	const mac = "52:54:00:e2:e0:62"
	res := boot(t, e, lan, dir, server, vm{fw: uefiPXE6, mac: mac, tap: "tap0"})
	checkDoneURL6(t, res.cmdline)
	lines, _ := server.out.snapshot(0)
	if !anyLine(lines, `msg="dhcp6 boot"`, "mac="+mac, "path=PXEv6", "reply=ADVERTISE") ||
		!anyLine(lines, `msg="dhcp6 boot"`, "mac="+mac, "path=PXEv6", "reply=REPLY", "boot_file=tftp://[fd00:213::1]/ipxe.efi") {
		t.Errorf("server log has no proxy ADVERTISE and port-4011 REPLY with tftp://[fd00:213::1]/ipxe.efi to PXEv6 for %s", mac)
	}
	if !anyLine(lines, `msg="tftp transfer done"`, "file=ipxe.efi", "remote=[fd00:213::1") {
		t.Errorf("server log has no TFTP transfer of ipxe.efi to an address of dnsmasq's range fd00:213::100-1ff")
	}
	all, _ := dnsmasq.out.snapshot(0)
	if !anyLine(all, "DHCPREPLY(eth0) fd00:213::1") {
		t.Errorf("dnsmasq never gave an address of its range; log:\n%s", dnsmasq.out.tail(30))
	}
	if !strings.HasPrefix(res.lease, "fd00:213::") {
		t.Errorf("the VM's address %q: want one in dnsmasq's fd00:213::/64", res.lease)
	}

	// The capture: what bootfleet (br0's MAC) sent over DHCPv6, on 547
	// and 4011, must hold boot file URLs and never an IA address.
	pcap.stop()
	brMAC := linkMAC(t, lan, bridge)
	read := func(filter, field string) []string {
		out := lan.out(t, "tshark", "-r", filepath.Join(dir, "br0.pcap"), "-d", "udp.port==4011,dhcpv6",
			"-Y", "eth.src == "+brMAC+" && "+filter, "-T", "fields", "-e", field)
		return strings.Fields(out)
	}
	if urls := read("dhcpv6.option.type == 59", "frame.number"); len(urls) < 2 {
		t.Errorf("capture: bootfleet sent %d DHCPv6 packets with a boot file URL, want the Advertise and the 4011 Reply at least", len(urls))
	}
	if addrs := read("dhcpv6.iaaddr.ip", "dhcpv6.iaaddr.ip"); len(addrs) != 0 {
		t.Errorf("capture: bootfleet handed out addresses %v in proxy mode; it must never send an IA address", addrs)
	}
}

// startDnsmasq6 runs dnsmasq as the site's DHCPv6 server and router (see
// TestUEFIPXEv6Proxy).
func startDnsmasq6(t testing.TB, ns *netns, dir string) *proc {
	t.Helper()
	return runDnsmasqUntil(t, ns, dir, "DHCPv6", "--interface=eth0", "--enable-ra",
		"--dhcp-range=fd00:213::100,fd00:213::1ff,slaac,64,1h",
		"--dhcp-userclass=set:ipxe,iPXE",
		"--dhcp-option=tag:ipxe,option6:bootfile-url,http://["+serverIP6+"]:8080/ipxe/${net0/mac:hexhyp}")
}

// linkMAC is the hardware address of dev in ns.
func linkMAC(t testing.TB, ns *netns, dev string) string {
	t.Helper()
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(ns.out(t, "ip", "-j", "link", "show", dev)), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %v", dev, err)
	}
	return links[0].Address
}
