package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

const arm64HTTPMAC = "52:54:00:e2:a6:44"

// TestARM64HTTPBoot: with TFTP dropped on the LAN, an arm64 virt machine
// under AAVMF with Secure Boot on boots by the firmware's own UEFI HTTP
// Boot. bootfleet offers it a disk image (application/vnd.efi-img) that
// AAVMF loads into a RAM disk; shim boots from it, then Debian's signed
// grubaa64 reads the machine's grub.cfg from the same disk and boots
// Debian's signed arm64 kernel, whose init calls the DoneURL. Nothing can
// have come over TFTP: its packets never reach the server.
func TestARM64HTTPBoot(t *testing.T) {
	parallelVM(t)
	e, dir, lan, server := arm64LAN(t)
	for _, args := range [][]string{
		{"add", "table", "inet", "notftp"},
		{"add", "chain", "inet", "notftp", "in", "{ type filter hook input priority 0 ; }"},
		{"add", "rule", "inet", "notftp", "in", "udp", "dport", "69", "counter", "drop"},
	} {
		if out, err := lan.command("nft", args...).CombinedOutput(); err != nil {
			t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}

	// AAVMF tries PXEv4 (whose TFTP is dropped), then HTTPv4. PXE over
	// IPv6, which this LAN does not serve, is switched off so the firmware
	// does not wait out its DHCPv6 in between.
	res := boot(t, e, lan, dir, server, vm{fw: aavmfSecure, mac: arm64HTTPMAC, tap: "tap0", timeout: 3 * bootTimeout(t),
		extra: []string{"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n"}})
	checkARM64SecureBoot(t, dir, arm64HTTPMAC, res)
	// The firmware's PXE attempt sent TFTP, which the rule dropped.
	out, err := lan.command("nft", "list", "table", "inet", "notftp").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table inet notftp: %v: %s", err, out)
	}
	writeArtifact(t, dir, "nft-notftp.txt", string(out))
	if strings.Contains(string(out), "counter packets 0 ") {
		t.Errorf("no TFTP packet was dropped, so the TFTP block was not tested:\n%s", out)
	}

	diskURL := "http://" + serverIP + ":8080/grub/" + strings.ReplaceAll(arm64HTTPMAC, ":", "-") + "/arm64/disk.img"
	lines, _ := server.out.snapshot(0)
	var offered bool
	for _, l := range lines {
		kv := parseLogfmt(l)
		if strings.HasPrefix(kv["msg"], "tftp:") {
			t.Errorf("the server did TFTP with TFTP dropped: %s", l)
		}
		if sameMAC(kv["mac"], arm64HTTPMAC) && kv["firmware"] == "uefi-arm64-http" && kv["msg"] == "dhcp offer" {
			offered = true
			if kv["vendor_class"] != "HTTPClient" || kv["boot_file"] != diskURL {
				t.Errorf("offer to the arm64 HTTP Boot client: vendor_class=%q boot_file=%q, want HTTPClient and %s", kv["vendor_class"], kv["boot_file"], diskURL)
			}
		}
	}
	if !offered {
		t.Errorf("server log has no \"dhcp offer\" to firmware=uefi-arm64-http for %s", arm64HTTPMAC)
	}

	b := bootRecord(t, lan, dir, arm64HTTPMAC)
	if b.State != telemetry.StateComplete {
		t.Errorf("boot %s is %s (%s), want complete", b.ID, b.State, b.Reason)
	}
	// The firmware's PXEv4 attempt, whose TFTP was dropped, comes first.
	if want := []string{"PXEv4", "HTTPv4", "grub"}; !slices.Equal(b.Path, want) {
		t.Errorf("boot record path %v, want %v", b.Path, want)
	}
	got := transfersOf(b)
	if got["/grub/"+strings.ReplaceAll(arm64HTTPMAC, ":", "-")+"/arm64/disk.img"] != "http" {
		t.Errorf("boot record transfers %v: want the disk image over http", got)
	}
	for name, proto := range got {
		if proto == "tftp" || strings.Contains(name, "x64") || strings.HasPrefix(name, "/profiles/"+mixedProfile+"/kernel") {
			t.Errorf("boot record transfer %s over %s: want only arm64 files over http", name, proto)
		}
	}
}
