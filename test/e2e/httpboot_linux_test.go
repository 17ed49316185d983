package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// TestUEFIHTTPBoot: OVMF's own HTTP boot client (HttpBootDxe, not iPXE)
// takes bootfleet's offer, which must carry option 60 "HTTPClient" and the
// NBP's URL, fetches ipxe.efi over HTTP, and iPXE boots Linux, which calls
// its DoneURL. PXE is switched off in the firmware (uefiHTTP), and the test
// fails if anything went over TFTP or the boot record's path does not start
// with HTTPv4, so a firmware that fell back to PXE cannot pass.
func TestUEFIHTTPBoot(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server := startBootfleet(t, e, lan, dir, "full")

	const mac = "52:54:00:e2:e0:10"
	res := boot(t, e, lan, dir, server, vm{fw: uefiHTTP, mac: mac, tap: "tap0"})
	checkProfile(t, res.cmdline, defaultProfile)

	// The server log: the firmware's DHCP answer and no TFTP at all.
	lines, _ := server.out.snapshot(0)
	nbpURL := "http://" + serverIP + ":8080/files/ipxe.efi"
	var offered bool
	for _, l := range lines {
		kv := parseLogfmt(l)
		if strings.HasPrefix(kv["msg"], "tftp:") {
			t.Errorf("the server did TFTP, so the firmware did not HTTP boot: %s", l)
		}
		if sameMAC(kv["mac"], mac) && kv["firmware"] == "uefi-x64-http" && kv["msg"] == "dhcp offer" {
			offered = true
			if kv["vendor_class"] != "HTTPClient" || kv["boot_file"] != nbpURL {
				t.Errorf("offer to the HTTP boot client: vendor_class=%q boot_file=%q, want HTTPClient and %s (UEFI 2.5+ section 24.7: an offer without HTTPClient is ignored)",
					kv["vendor_class"], kv["boot_file"], nbpURL)
			}
		}
	}
	if !offered {
		t.Errorf("server log has no \"dhcp offer\" to firmware=uefi-x64-http for %s: OVMF did not ask as an HTTP boot client\n%s", mac, server.out.tail(40))
	}

	// The boot record says the same, and names the path.
	web := proxyInto(t, lan, serverIP+":8080")
	var list struct{ Boots []telemetry.Boot }
	getJSON(t, web+"/api/v1/boots?mac="+mac, apiToken(t, dir), &list)
	if len(list.Boots) != 1 {
		t.Fatalf("GET /api/v1/boots?mac=%s: %d boots, want 1: %+v", mac, len(list.Boots), list.Boots)
	}
	b := list.Boots[0]
	writeArtifact(t, dir, "boot.json", b)
	checkHTTPBootRecord(t, b, nbpURL)
}

// checkHTTPBootRecord asserts that a boot went UEFI HTTP boot → iPXE: the
// path, an OFFER with HTTPClient and the NBP URL, the NBP fetched over
// HTTP, and no TFTP transfer.
func checkHTTPBootRecord(t *testing.T, b telemetry.Boot, nbpURL string) {
	t.Helper()
	if b.State != telemetry.StateComplete {
		t.Errorf("boot %s is %s (%s), want complete", b.ID, b.State, b.Reason)
	}
	if want := []string{"HTTPv4", "iPXE"}; !slices.Equal(b.Path, want) {
		t.Errorf("boot record path %v, want %v", b.Path, want)
	}
	var offer bool
	for _, x := range b.DHCP {
		offer = offer || x.Type == "OFFER" && x.VendorClass == "HTTPClient" && x.BootFile == nbpURL
	}
	if !offer {
		t.Errorf("boot record DHCP %+v: want an OFFER with vendor_class HTTPClient and boot_file %s", b.DHCP, nbpURL)
	}
	var nbp bool
	for _, x := range b.Transfers {
		if x.Proto == "tftp" {
			t.Errorf("boot record has a TFTP transfer %+v: the firmware fell back to PXE", x)
		}
		nbp = nbp || x.Proto == "http" && x.Name == "ipxe.efi" && x.Bytes > 0 && x.Err == ""
	}
	if !nbp {
		t.Errorf("boot record transfers %+v: want ipxe.efi over HTTP", b.Transfers)
	}
}
