package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/fleet"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

func invConfig(t *testing.T, data string) *config.Config {
	t.Helper()
	c, err := config.Parse(strings.NewReader(`
server_ip: 127.0.0.1
data: ` + data + `
dhcp: {mode: off}
default_profile: linux
profiles:
  linux: {kernel: /k}
machines:
  - {mac: "52:54:00:00:00:01", name: cfg1}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func openInv(t *testing.T, c *config.Config) (*Inventory, *fleet.View) {
	t.Helper()
	view, err := fleet.FromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := OpenInventory(context.Background(), c, view, InventoryOptions{Discover: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return inv, view
}

// TestInventoryWiring: an API write is live in the fleet view at once, the
// API sits in front of the boot handler, and everything survives a restart.
func TestInventoryWiring(t *testing.T) {
	data := t.TempDir()
	c := invConfig(t, data)
	inv, view := openInv(t, c)
	tok, err := api.ReadToken(filepath.Join(data, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	boot := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "boot "+r.URL.Path) })
	srv := httptest.NewServer(inv.Handler(boot))
	defer srv.Close()

	post := func(path, body string) int {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("/api/v1/profiles", `{"name":"rescue","kernel":"/r"}`); got != 201 {
		t.Fatalf("add profile: %d", got)
	}
	if got := post("/api/v1/machines", `{"mac":"52:54:00:00:00:02","name":"pc2","profile":"rescue","ip":"10.0.0.9"}`); got != 201 {
		t.Fatalf("add machine: %d", got)
	}
	mac2, _ := net.ParseMAC("52:54:00:00:00:02")
	if tg, ok := view.Resolve(mac2); !ok || tg.Profile != "rescue" || tg.Machine.Name != "pc2" {
		t.Fatalf("the next request after the API write resolves to %+v, %v; want profile rescue", tg, ok)
	}
	if got := view.ReservedFor(net.IPv4(10, 0, 0, 9)); got.String() != mac2.String() {
		t.Fatalf("reservation not live: %v", got)
	}
	resp, err := http.Get(srv.URL + "/ipxe/52-54-00-00-00-02")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "boot /ipxe/52-54-00-00-00-02" {
		t.Fatalf("non-API path answered %q", b)
	}

	leases := inv.Leases()
	if err := leases.Put(context.Background(), dhcp.Lease{MAC: mac2, IP: net.IPv4(10, 0, 0, 9), Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	inv.Close()

	inv, view = openInv(t, c)
	defer inv.Close()
	if tg, ok := view.Resolve(mac2); !ok || tg.Profile != "rescue" {
		t.Fatalf("after restart: %+v, %v", tg, ok)
	}
	ls, err := inv.Leases().Load(context.Background())
	if err != nil || len(ls) != 1 || ls[0].IP.String() != "10.0.0.9" {
		t.Fatalf("leases after restart: %v, %v", ls, err)
	}
	fi, err := os.Stat(filepath.Join(data, api.TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v", fi, err)
	}
}

// TestDiscovery: an unknown machine's DHCPDISCOVER records it as discovered,
// without blocking DHCP, and it then shows in the view.
func TestDiscovery(t *testing.T) {
	inv, view := openInv(t, invConfig(t, t.TempDir()))
	defer inv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- inv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	obs := inv.Observer(nil)
	unknown, _ := net.ParseMAC("52:54:00:00:00:77")
	known, _ := net.ParseMAC("52:54:00:00:00:01")
	obs.DHCPPacket(unknown, dhcpv4.MessageTypeDiscover, pxe.Client{})
	obs.DHCPPacket(known, dhcpv4.MessageTypeDiscover, pxe.Client{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := inv.Store().GetMachine(context.Background(), unknown)
		k, kerr := inv.Store().GetMachine(context.Background(), known)
		if err == nil && kerr == nil && k.State == inventory.StateBooting {
			if m.State != inventory.StateDiscovered || m.LastBoot.IsZero() {
				t.Fatalf("discovered machine recorded as %+v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recorded in time: %v / %+v %v", err, k, kerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := view.Machine(unknown); !ok {
		t.Fatal("discovered machine is not in the fleet view")
	}
	ms, _ := inv.Store().ListMachines(context.Background(), inventory.MachineFilter{State: inventory.StateDiscovered})
	if len(ms) != 1 {
		t.Fatalf("machine list --state discovered would show %d machines, want 1", len(ms))
	}
}

func TestOpenStoreRejectsUnknownScheme(t *testing.T) {
	c := invConfig(t, t.TempDir())
	if _, err := openStore(context.Background(), c, "mysql://x"); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("got %v", err)
	}
}
