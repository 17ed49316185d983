package app

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// TestOneBootClock: with telemetry on or off, the taps time a boot from
// its first DHCP packet to its DoneURL, and the history the API and
// `bootfleet boots` read lists it complete. With telemetry on the
// completion is stored once, in the boot record; off, nothing is stored.
func TestOneBootClock(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			c := testConfig(t, "127.0.0.1:0")
			c.Telemetry = mode
			if err := os.MkdirAll(c.Data, 0o750); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			store, err := inventorysvc.OpenStore(ctx, c.Store, c.Data)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			log := slog.New(slog.DiscardHandler)
			rec, history := newHistory(c, store, "s1", log)
			taps := telemetryTaps(c, rec, log)
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- history.Run(runCtx) }()

			mac, _ := net.ParseMAC("52:54:00:00:00:01")
			taps.dhcp.DHCPPacket(mac, dhcpv4.MessageTypeDiscover, pxe.Client{PXE: true, Arch: pxe.ArchEFIx64, HasArch: true})
			if _, ok := taps.boots.Complete(mac); !ok {
				t.Fatal("DoneURL: no duration, want the time since the DHCPDISCOVER")
			}
			bs, err := history.Boots(ctx, telemetry.Filter{MAC: mac})
			if err != nil || len(bs) != 1 || bs[0].State != telemetry.StateComplete {
				t.Fatalf("boots of %s: %+v, %v; want one, complete", mac, bs, err)
			}
			stop() // stores what is queued
			if err := <-ran; err != nil {
				t.Fatalf("history: %v", err)
			}
			recs, err := store.ListBoots(ctx, inventory.BootFilter{MAC: mac})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"on": 1, "off": 0}[mode]
			if len(recs) != want {
				t.Fatalf("%d boot records stored, want %d", len(recs), want)
			}
		})
	}
}
