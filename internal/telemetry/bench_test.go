package telemetry

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// Telemetry on against off. The issue allows 2%:
//
//	go test -run '^$' -bench . -benchtime 200x -count 5 ./internal/telemetry/
//
// BenchmarkHTTPTransfer serves a 4 MiB file over loopback HTTP through the
// real boot handler, with and without the recorder's hooks; the hooks run
// once per file, so their cost is the per-call numbers of the hook
// benchmarks against a transfer's duration.

type dirOpener string

func (d dirOpener) Open(name string) (*os.File, error) {
	return os.Open(filepath.Join(string(d), name))
}

type noFleet struct{}

func (noFleet) Resolve(net.HardwareAddr) (machineview.Target, bool) {
	return machineview.Target{}, false
}
func (noFleet) Profile(string) (inventory.Profile, bool) { return inventory.Profile{}, false }

type noClock struct{}

func (noClock) Complete(net.HardwareAddr) (time.Duration, bool) { return 0, false }

func BenchmarkHTTPTransfer(b *testing.B) {
	dir := b.TempDir()
	const size = 4 << 20
	if err := os.WriteFile(filepath.Join(dir, "img"), make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			cfg := httpboot.Config{Files: dirOpener(dir), Fleet: noFleet{}, Boots: noClock{}, BaseURL: "http://x"}
			if on {
				r := New(Config{LookupIP: func(net.IP) net.HardwareAddr { return nil }})
				r.DHCPPacket(mac, dhcpv4.MessageTypeDiscover, ipxe) // an open boot to record into
				cfg.Transfers, cfg.Milestones, cfg.Boots = r, r, r
			}
			srv := httptest.NewServer(httpboot.New(cfg))
			defer srv.Close()
			url := srv.URL + "/files/img?mac=52-54-00-00-00-01"
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := io.Copy(io.Discard, resp.Body); n != size {
					b.Fatalf("got %d bytes", n)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkDHCPHook is the per-packet cost the DHCP server pays.
func BenchmarkDHCPHook(b *testing.B) {
	r := New(Config{})
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	r.DHCPPacket(mac, dhcpv4.MessageTypeDiscover, ipxe)
	for b.Loop() {
		r.DHCPPacket(mac, dhcpv4.MessageTypeRequest, ipxe)
	}
}

// BenchmarkTFTPHook is the per-transfer cost the TFTP server pays, with
// the address already learned (no neighbour-table read).
func BenchmarkTFTPHook(b *testing.B) {
	r := New(Config{})
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	r.DHCPPacket(mac, dhcpv4.MessageTypeDiscover, ipxe)
	r.Milestone(mac, "ipxe-script", "10.0.0.1:1000")
	st := tftp.TransferStats{Remote: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 2000}, Filename: "ipxe.efi",
		Bytes: 1 << 20, Start: time.Now(), Duration: time.Second, BlockSize: 1456, WindowSize: 16}
	for b.Loop() {
		r.TFTPTransfer(st)
	}
}

// BenchmarkMergeBoots: what a fleet's read of the default listing costs
// in merging: 1016 records (GET /boots reads 2 limit + 16), half of them
// DHCP records of one server and half the file servers' partial records.
func BenchmarkMergeBoots(b *testing.B) {
	tf := newTestFleet(Config{MaxBoots: 1 << 12}, "a", "b")
	for i := range 508 {
		mac := net.HardwareAddr{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}
		for _, s := range []fleetStep{heard("a", mac, ipxe), answered("a", mac), sent("b", mac, "vmlinuz"),
			sent("b", mac, "initrd"), doneOn("a", mac)} {
			s(tf)
		}
	}
	recs := tf.records()
	if len(recs) != 1016 {
		b.Fatalf("%d records, want 1016", len(recs))
	}
	b.ResetTimer()
	for range b.N {
		if got := mergeBoots(recs, time.Hour); len(got) != 508 {
			b.Fatalf("%d boots, want 508", len(got))
		}
	}
}
