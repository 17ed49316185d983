package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// TestBootsFleet: server a answers the machine's DHCP and renders its
// script, server b sends the kernel and initrd and takes the DoneURL. The
// API and CLI of a, which holds only its own part in memory and b's in
// the shared store, list one boot, and show it whichever part's ID is
// asked for.
func TestBootsFleet(t *testing.T) {
	ctx := context.Background()
	clock := t0
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	web1, _ := net.ParseMAC("52:54:00:aa:bb:10")
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: web1, Name: "web1"}); err != nil {
		t.Fatal(err)
	}
	recs := map[string]*telemetry.Recorder{}
	for _, s := range []string{"a", "b"} {
		recs[s] = telemetry.New(telemetry.Config{Server: s, Ended: 16, Now: func() time.Time { return clock },
			LookupIP: func(net.IP) net.HardwareAddr { return nil }})
	}
	step := func(d time.Duration) { clock = clock.Add(d) }
	ipxe := pxe.Client{PXE: true, IPXE: true, Arch: pxe.ArchEFIx64, HasArch: true}
	get := func(name string, n int64, d time.Duration) {
		recs["b"].HTTPTransferDone(httpboot.FileTransfer{MAC: web1, Remote: "10.0.0.10:3000", Name: name, Bytes: n, Start: clock, Duration: d})
		step(d)
	}
	recs["a"].DHCPPacket(web1, dhcpv4.MessageTypeDiscover, ipxe)
	step(1500 * time.Millisecond)
	recs["a"].DHCPPacket(web1, dhcpv4.MessageTypeRequest, ipxe)
	recs["a"].Milestone(web1, "ipxe-script", "10.0.0.10:3001")
	get("/srv/vmlinuz", 7_500_000, 1500*time.Millisecond)
	get("/srv/initrd.img", 30_000_000, 6*time.Second)
	step(12 * time.Second)
	recs["b"].Complete(web1)
	step(time.Minute)

	// b stores its ended part, as its History does while it runs.
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- telemetry.NewHistory(recs["b"], telemetry.HistoryConfig{Store: st, Flush: 5 * time.Millisecond}).Run(runCtx)
	}()
	var stored []inventory.BootRecord
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(stored) == 0; time.Sleep(5 * time.Millisecond) {
		if stored, err = st.ListBoots(ctx, inventory.BootFilter{}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-ran; err != nil || len(stored) != 1 {
		t.Fatalf("b stored %d records (Run: %v), want its one part", len(stored), err)
	}

	h, err := api.New(api.Config{Store: st, Token: testToken, Boots: telemetry.NewHistory(recs["a"], telemetry.HistoryConfig{Store: st}),
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
	conn := connArgs(t, srv)

	var list []telemetry.Boot
	if err := json.Unmarshal([]byte(run(t, append([]string{"boots", "-o", "json"}, conn...)...)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[0].Parts) != 2 || list[0].State != telemetry.StateComplete || list[0].DoneServer != "b" {
		t.Fatalf("boots lists %d boots (%+v), want one, complete, of a's and b's parts, done on b", len(list), list)
	}
	golden(t, "boots-fleet-list", run(t, append([]string{"boots"}, conn...)...))
	for _, id := range list[0].Parts {
		t.Run("show "+id, func(t *testing.T) {
			golden(t, "boots-fleet-show", run(t, append([]string{"boots", "show", id}, conn...)...))
		})
	}
}
