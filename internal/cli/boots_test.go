package cli

import (
	"context"
	"net"
	"net/http/httptest"
	"net/url"
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
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// recordedBoots is a recorder holding a UEFI boot of machine "web1" that
// completed, its group lossy, and an iPXE boot of an unnamed machine
// still in progress, reading its root by unicast alone.
func recordedBoots(clock *time.Time) *telemetry.Recorder {
	r := telemetry.New(telemetry.Config{Now: func() time.Time { return *clock },
		LookupIP: func(ip net.IP) net.HardwareAddr { // the neighbour table
			if ip.String() == "10.0.0.10" {
				return net.HardwareAddr{0x52, 0x54, 0x00, 0xaa, 0xbb, 0x10}
			}
			return nil
		}})
	step := func(d time.Duration) { *clock = clock.Add(d) }
	web1, _ := net.ParseMAC("52:54:00:aa:bb:10")
	other, _ := net.ParseMAC("52:54:00:aa:bb:11")
	uefi := pxe.Client{PXE: true, Arch: pxe.ArchEFIx64, HasArch: true}
	ipxe := pxe.Client{PXE: true, IPXE: true, Arch: pxe.ArchEFIx64, HasArch: true}
	dora := func(mac net.HardwareAddr, c pxe.Client) {
		r.DHCPPacket(mac, dhcpv4.MessageTypeDiscover, c)
		step(1500 * time.Millisecond)
		r.DHCPPacket(mac, dhcpv4.MessageTypeRequest, c)
	}
	get := func(mac net.HardwareAddr, name string, n int64, d time.Duration) {
		r.HTTPTransferStarted()
		r.HTTPTransferDone(httpboot.FileTransfer{MAC: mac, Remote: "10.0.0.10:3000", Name: name, Bytes: n, Start: *clock, Duration: d})
		step(d)
	}
	dora(web1, uefi)
	step(500 * time.Millisecond)
	r.TFTPTransfer(tftp.TransferStats{Remote: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 10), Port: 1024}, Filename: "ipxe.efi",
		Bytes: 1_040_000, Start: *clock, Duration: 800 * time.Millisecond, BlockSize: 1456, WindowSize: 16, Retransmits: 3})
	step(800 * time.Millisecond)
	dora(web1, ipxe)
	r.Milestone(web1, "ipxe-script", "10.0.0.10:3001")
	get(web1, "/srv/vmlinuz", 7_500_000, 1500*time.Millisecond)
	get(web1, "/srv/initrd.img", 30_000_000, 6*time.Second)
	step(12 * time.Second)
	r.Milestone(web1, "kernel-up", "10.0.0.10:3002")
	rootIO(r, web1, "multicast=52428800&unicast=20971520&hits=62914560&misses=10485760&written=0&fallbacks=7&lost=130&repairs=41&group=lossy")
	step(3 * time.Second)
	r.Complete(web1)
	step(time.Minute)
	dora(other, ipxe)
	step(2 * time.Second)
	rootIO(r, other, "multicast=0&unicast=4194304&hits=0&misses=4194304&written=0&fallbacks=0&group=off")
	return r
}

// rootIO records a root-io report as the agent sends it (agent.RootIOQuery).
func rootIO(r *telemetry.Recorder, mac net.HardwareAddr, query string) {
	q, err := url.ParseQuery(query)
	if err == nil {
		err = r.RootIO(mac, q, "10.0.0.10:3003")
	}
	if err != nil {
		panic(err)
	}
}

func TestBootsGolden(t *testing.T) {
	clock := t0
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	web1, _ := net.ParseMAC("52:54:00:aa:bb:10")
	if _, err := st.CreateMachine(context.Background(), inventory.Machine{MAC: web1, Name: "web1"}); err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Token: testToken, Boots: telemetry.NewHistory(recordedBoots(&clock), telemetry.HistoryConfig{}), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
	conn := connArgs(t, srv)
	id := "525400aabb10-" + "1772353800000"

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"boots-list", []string{"boots"}},
		{"boots-list-machine", []string{"boots", "--machine", "web1"}},
		{"boots-list-since", []string{"boots", "--since", "30s"}},
		{"boots-list-json", []string{"boots", "--machine", "52-54-00-aa-bb-11", "-o", "json"}},
		{"boots-bad-since", []string{"boots", "--since", "yesterday"}},
		{"boots-show", []string{"boots", "show", id}},
		{"boots-show-missing", []string{"boots", "show", "nope"}},
		{"boots-no-token", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, tc.args...), conn...)
			if tc.args == nil {
				args = append(append([]string{"boots"}, conn...), "--token", "") // the last --token wins
			}
			golden(t, tc.name, run(t, args...))
		})
	}
}
