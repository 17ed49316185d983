package e2e

import (
	"strings"
	"testing"
)

// Every test boots a MAC that is not under machines except TestMachineProfile,
// so each of them also proves that unlisted machines get default_profile.

// TestUEFIPXE: OVMF's own PXEv4 client gets ipxe.efi over TFTP, iPXE fetches
// its script, kernel and initrd over HTTP, and Linux calls the DoneURL.
func TestUEFIPXE(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server := startBootfleet(t, e, lan, dir, "full")

	res := boot(t, e, lan, dir, server, vm{fw: uefi, mac: "52:54:00:e2:e0:01", tap: "tap0"})
	checkProfile(t, res.cmdline, defaultProfile)
	// Debian 12's iPXE on UEFI only hands the initrd to Linux when the
	// command line names it; the boot would have failed without it, but
	// say why if it ever does.
	if !strings.Contains(res.cmdline, "initrd=") {
		t.Errorf("UEFI kernel command line %q has no initrd=NAME", res.cmdline)
	}
}

// TestBIOSiPXEROM: SeaBIOS runs QEMU's iPXE NIC ROM, which is already iPXE,
// so DHCP must give it the script URL instead of chainloading undionly.kpxe.
func TestBIOSiPXEROM(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server := startBootfleet(t, e, lan, dir, "full")

	res := boot(t, e, lan, dir, server, vm{fw: bios, mac: "52:54:00:e2:e0:02", tap: "tap0"})
	checkProfile(t, res.cmdline, defaultProfile)
}

// TestProxyDHCP: bootfleet in proxy mode next to dnsmasq, which hands out
// addresses only. OVMF must combine dnsmasq's lease with bootfleet's boot
// options, and the address must come from dnsmasq, never from bootfleet.
func TestProxyDHCP(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	site := lan.addPeer(t, "10.213.0.2/24")
	startCapture(t, lan, dir)
	dnsmasq := startDnsmasq(t, site, dir)
	server := startBootfleet(t, e, lan, dir, "proxy")

	mac := "52:54:00:e2:e0:03"
	res := boot(t, e, lan, dir, server, vm{fw: uefi, mac: mac, tap: "tap0"})
	checkProfile(t, res.cmdline, defaultProfile)
	// The Linux in the VM asks for its own lease; only dnsmasq may answer.
	if !strings.Contains(res.lease, "server=10.213.0.2") || !strings.HasPrefix(res.lease, "10.213.0.") {
		t.Errorf("VM lease %q: want an address from dnsmasq (server=10.213.0.2) in its range 10.213.0.50-90", res.lease)
	}
	if all, _ := dnsmasq.out.snapshot(0); !anyLine(all, "DHCPACK(eth0)", mac) {
		t.Errorf("dnsmasq never acknowledged a lease for %s; log:\n%s", mac, dnsmasq.out.tail(30))
	}
}

// TestMachineProfile: a MAC listed under machines boots its own profile,
// with a different kernel command line.
func TestMachineProfile(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server := startBootfleet(t, e, lan, dir, "full")

	res := boot(t, e, lan, dir, server, vm{fw: bios, mac: listedMAC, tap: "tap0"})
	checkProfile(t, res.cmdline, specialProfile)
	if !strings.Contains(res.cmdline, "bf.extra=1") {
		t.Errorf("kernel command line %q: want profile %s's bf.extra=1", res.cmdline, specialProfile)
	}
}

func anyLine(lines []string, subs ...string) bool {
	for _, l := range lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}
