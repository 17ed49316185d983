package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// TestNoBoot: an arm64 machine whose profile has no arm64 kernel gets no
// boot file; its record ends failed with the reason at once, its DHCP
// exchange names the firmware, and the firmware's next attempt opens a
// record of its own that fails the same way.
func TestNoBoot(t *testing.T) {
	f := newFake(t, Config{})
	arm := pxe.Client{PXE: true, Arch: pxe.ArchEFIARM64, HasArch: true}
	const why = "no boot file: the machine is arm64 and profile lab has no arm64 kernel"
	for range 2 {
		f.dhcp(macA, dhcpv4.MessageTypeDiscover, arm)
		f.r.NoBoot(macA, why)
		f.step(4 * time.Second)
	}
	f.r.NoBoot(macB, why) // no open boot: nothing to record
	bs := f.r.Boots(Filter{})
	if len(bs) != 2 {
		t.Fatalf("got %d boots, want one per attempt: %+v", len(bs), bs)
	}
	for _, b := range bs {
		if b.MAC != macA.String() || b.State != StateFailed || !strings.Contains(b.Reason, "has no arm64 kernel") {
			t.Errorf("boot %s of %s: %s (%q), want failed saying the profile has no arm64 kernel", b.ID, b.MAC, b.State, b.Reason)
		}
		if len(b.DHCP) == 0 || b.DHCP[0].Client != "uefi-arm64" {
			t.Errorf("boot %s: DHCP %+v, want the exchange naming uefi-arm64", b.ID, b.DHCP)
		}
	}
}
