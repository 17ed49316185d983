package inventorysvc

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

func fileConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Parse(strings.NewReader("server_ip: 127.0.0.1\ndata: " + t.TempDir() + "\ndhcp: {mode: off}\n" + y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const invYAML = `
default_profile: linux
profiles:
  linux: {kernel: /k}
machines:
  - {mac: "52:54:00:00:00:01", name: cfg1}
`

func openStore(t *testing.T, data string) inventory.Store {
	t.Helper()
	st, err := OpenStore(context.Background(), "", data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newService(t *testing.T, st inventory.Store, c *config.Config) *Service {
	t.Helper()
	s, err := New(context.Background(), Config{Store: st, File: c, Discover: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// TestAPIWritesAreLive: an API write is live in the fleet view at once,
// and the view and the leases survive a restart.
func TestAPIWritesAreLive(t *testing.T) {
	c := fileConfig(t, invYAML)
	st := openStore(t, c.Data)
	svc := newService(t, st, c)
	const tok = "0123456789abcdef0123"
	h, err := api.New(api.Config{Store: st, Token: tok, OnChange: svc.Changed})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path, body string) int {
		req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
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
	mac2 := mac("52:54:00:00:00:02")
	view := svc.View()
	if tg, ok := view.Resolve(mac2); !ok || tg.Profile != "rescue" || tg.Machine.Name != "pc2" {
		t.Fatalf("the next request after the API write resolves to %+v, %v; want profile rescue", tg, ok)
	}
	if got := view.ReservedFor(net.IPv4(10, 0, 0, 9)); got.String() != mac2.String() {
		t.Fatalf("reservation not live: %v", got)
	}
	if err := NewLeases(st).Put(context.Background(), dhcp.Lease{MAC: mac2, IP: net.IPv4(10, 0, 0, 9), Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, c.Data)
	defer st.Close()
	svc = newService(t, st, c)
	if tg, ok := svc.View().Resolve(mac2); !ok || tg.Profile != "rescue" {
		t.Fatalf("after restart: %+v, %v", tg, ok)
	}
	ls, err := NewLeases(st).Load(context.Background())
	if err != nil || len(ls) != 1 || ls[0].IP.String() != "10.0.0.9" {
		t.Fatalf("leases after restart: %v, %v", ls, err)
	}
}

// TestViewFromStore: the view holds the store's machines and profiles,
// the config's and the API's, root settings included.
func TestViewFromStore(t *testing.T) {
	c := fileConfig(t, `
profiles:
  memtest: {kernel: /m}
  own: {cmdline: quiet, root: {image: debian, kernel: image}}
  plain: {kernel: /k, root: {image: debian}}
machines:
  - {mac: "52:54:00:00:00:01", name: pc1, profile: memtest}
`)
	st := openStore(t, c.Data)
	defer st.Close()
	ctx := context.Background()
	if _, err := st.CreateProfile(ctx, inventory.Profile{Name: "linux", Kernel: "/k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: mac("52:54:00:00:00:03"), Name: "api1", Profile: "linux"}); err != nil {
		t.Fatal(err)
	}
	v := newService(t, st, c).View()
	if tg, ok := v.Resolve(mac("52:54:00:00:00:03")); !ok || tg.Profile != "linux" || tg.Machine.Name != "api1" {
		t.Fatalf("Resolve(api1) = %+v, %v", tg, ok)
	}
	if tg, ok := v.Resolve(mac("52:54:00:00:00:01")); !ok || tg.Profile != "memtest" {
		t.Fatalf("Resolve(pc1) = %+v, %v", tg, ok)
	}
	for name, want := range map[string]inventory.Root{
		"own":   {Image: "debian", Overlay: "ephemeral", Kernel: inventory.RootKernelImage},
		"plain": {Image: "debian", Overlay: "ephemeral"},
	} {
		p, ok := v.Profile(name)
		if !ok || p.Root != want {
			t.Errorf("fleet profile %s root = %+v (found %v), want %+v", name, p.Root, ok, want)
		}
	}
}

// TestDiscovery: an unknown machine's DHCPDISCOVER records it as discovered,
// without blocking DHCP, and it then shows in the view.
func TestDiscovery(t *testing.T) {
	c := fileConfig(t, invYAML)
	st := openStore(t, c.Data)
	defer st.Close()
	svc := newService(t, st, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()

	obs := svc.Observer(nil)
	unknown, known := mac("52:54:00:00:00:77"), mac("52:54:00:00:00:01")
	obs.DHCPPacket(unknown, dhcpv4.MessageTypeDiscover, pxe.Client{})
	obs.DHCPPacket(known, dhcpv4.MessageTypeDiscover, pxe.Client{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := st.GetMachine(context.Background(), unknown)
		k, kerr := st.GetMachine(context.Background(), known)
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
	if _, ok := svc.View().Machine(unknown); !ok {
		t.Fatal("discovered machine is not in the fleet view")
	}
	ms, err := st.ListMachines(context.Background(), inventory.MachineFilter{State: inventory.StateDiscovered})
	if err != nil || len(ms) != 1 {
		t.Fatalf("machine list --state discovered would show %d machines (%v), want 1", len(ms), err)
	}
}

func TestOpenStoreRejectsUnknownScheme(t *testing.T) {
	if _, err := OpenStore(context.Background(), "mysql://x", t.TempDir()); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("got %v", err)
	}
}
