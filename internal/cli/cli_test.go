package cli

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
)

const testToken = "feedfacefeedfacefeedfacefeedface"

var t0 = time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)

// newServer runs the real API over a fresh SQLite store, configured
// further by opts.
func newServer(t *testing.T, opts ...func(*api.Config)) (*httptest.Server, inventory.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := api.Config{Store: st, Token: testToken, Now: func() time.Time { return t0 }}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, st
}

// connArgs are the flags that reach srv, with the environment's server
// and token cleared so that only the flags count.
func connArgs(t *testing.T, srv *httptest.Server) []string {
	t.Helper()
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", "")
	return []string{"--server", srv.URL, "--token", testToken, "--data", t.TempDir()}
}

// run executes the CLI and returns what it printed, plus "error: ..." as
// main would print it.
func run(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	root := Root()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.ExecuteContext(context.Background()); err != nil {
		out.WriteString("error: " + err.Error() + "\n")
	}
	return out.String()
}

// machineIDs are drawn at random when a machine is added; golden files
// hold a placeholder.
var machineIDs = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = machineIDs.ReplaceAllString(got, "<machine-id>")
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (UPDATE_TESTDATA=1 rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestGolden walks an admin's day: add a profile and a machine, enroll a
// discovered one, look at leases, clean up, and hit the common mistakes.
func TestGolden(t *testing.T) {
	srv, st := newServer(t)
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", "")
	now = func() time.Time { return t0 }
	t.Cleanup(func() { now = time.Now })
	emptyData := t.TempDir()
	conn := []string{"--server", srv.URL, "--token", testToken, "--data", emptyData}

	// What the boot path would have recorded: a discovered machine and leases.
	ctx := context.Background()
	disc, _ := net.ParseMAC("52:54:00:aa:bb:01")
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: disc, State: inventory.StateDiscovered}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetStatus(ctx, disc, inventory.StateDiscovered, t0.Add(-time.Hour), net.IPv4(10, 0, 0, 117)); err != nil {
		t.Fatal(err)
	}
	for i, l := range []struct {
		mac string
		ip  net.IP
		exp time.Time
	}{{"52:54:00:aa:bb:01", net.IPv4(10, 0, 0, 117), t0.Add(time.Hour)}, {"52:54:00:12:34:56", net.IPv4(10, 0, 0, 20), t0.Add(-time.Minute)}} {
		hw, _ := net.ParseMAC(l.mac)
		if err := st.PutLease(ctx, inventory.Lease{MAC: hw, IP: l.ip, Expiry: l.exp}); err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
	}
	// Two versions of image debian, which machine-set-root-channel pins.
	storetest.AddVersions(t, st, "debian", inventory.VersionProduction, inventory.VersionTest)
	// A DHCPv6 lease of the discovered machine, and one of a client whose
	// MAC the server could not tell.
	for i, l := range []inventory.Lease6{
		{DUID: append([]byte{0, 3, 0, 1}, disc...), MAC: disc, IP: net.ParseIP("fd00:213::100"), Expiry: t0.Add(time.Hour)},
		{DUID: []byte{0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, IP: net.ParseIP("fd00:213::101"), Expiry: t0.Add(-time.Minute)},
	} {
		if err := st.PutLease6(ctx, l); err != nil {
			t.Fatalf("DHCPv6 lease %d: %v", i, err)
		}
	}

	steps := []struct {
		name string
		args []string
	}{
		{"profile-add", []string{"profile", "add", "linux", "--kernel", "/srv/vmlinuz", "--initrd", "/srv/initrd.img", "--cmdline", "console=ttyS0 host={{.Name}}"}},
		{"profile-add-json", []string{"profile", "add", "rescue", "--kernel", "http://10.0.0.1/rescue", "-o", "json"}},
		{"profile-add-bad-template", []string{"profile", "add", "broken", "--kernel", "/k", "--cmdline", "host={{.Hostname}}"}},
		{"profile-list", []string{"profile", "list"}},
		{"profile-show", []string{"profile", "show", "linux"}},
		{"profile-add-root-kernel", []string{"profile", "add", "lab", "--root-image", "debian", "--root-kernel", "image", "--cmdline", "console=ttyS0"}},
		{"profile-show-root-kernel", []string{"profile", "show", "lab"}},
		{"profile-show-root-kernel-json", []string{"profile", "show", "lab", "-o", "json"}},
		{"profile-add-root-kernel-and-kernel", []string{"profile", "add", "lab2", "--kernel", "/srv/vmlinuz", "--root-image", "debian", "--root-kernel", "image"}},
		{"profile-add-no-kernel", []string{"profile", "add", "lab3", "--root-image", "debian"}},
		{"machine-add", []string{"machine", "add", "--mac", "52:54:00:12:34:56", "--name", "pc1", "--profile", "linux", "--label", "room=lab2", "--label", "row=3"}},
		{"machine-add-duplicate-name", []string{"machine", "add", "--mac", "52:54:00:12:34:57", "--name", "pc1"}},
		{"machine-add-unknown-profile", []string{"machine", "add", "--mac", "52:54:00:12:34:57", "--profile", "windows"}},
		{"machine-add-bad-mac", []string{"machine", "add", "--mac", "52:54:00:12:34"}},
		{"machine-add-bad-label", []string{"machine", "add", "--mac", "52:54:00:12:34:57", "--label", "room"}},
		{"machine-list", []string{"machine", "list"}},
		{"machine-list-discovered", []string{"machine", "list", "--state", "discovered"}},
		{"machine-set-enroll", []string{"machine", "set", "52:54:00:aa:bb:01", "--profile", "rescue", "--name", "pc2"}},
		{"machine-set-nothing", []string{"machine", "set", "pc2"}},
		{"machine-set-labels", []string{"machine", "set", "pc1", "--unlabel", "row", "--label", "rack=r7"}},
		{"machine-show", []string{"machine", "show", "pc1"}},
		{"machine-show-json", []string{"machine", "show", "52-54-00-aa-bb-01", "-o", "json"}},
		{"machine-list-json", []string{"machine", "list", "-o", "json", "--profile", "rescue"}},
		{"machine-show-missing", []string{"machine", "show", "pc9"}},
		{"machine-add-root-channel", []string{"machine", "add", "--mac", "52:54:00:12:34:58", "--name", "pc3", "--profile", "lab", "--root-channel", "test"}},
		{"machine-set-root-channel-bad", []string{"machine", "set", "pc3", "--root-channel", "latest"}},
		{"machine-set-root-channel", []string{"machine", "set", "pc3", "--root-channel", "2", "-o", "json"}},
		{"lease-list", []string{"lease", "list"}},
		{"lease-list-json", []string{"lease", "list", "-o", "json"}},
		{"profile-rm-in-use", []string{"profile", "rm", "linux"}},
		{"machine-rm", []string{"machine", "rm", "pc1"}},
		{"profile-rm", []string{"profile", "rm", "linux"}},
		{"bad-output", []string{"machine", "list", "-o", "yaml"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			golden(t, s.name, run(t, append(s.args, conn...)...))
		})
	}
	t.Run("no-token", func(t *testing.T) {
		golden(t, "no-token", run(t, "machine", "rm", "pc2", "--server", srv.URL, "--data", emptyData))
	})
}

// TestTokenAndServerDiscovery: with no flags the CLI reads the server from
// BOOTFLEET_SERVER and the token from the data directory.
func TestTokenAndServerDiscovery(t *testing.T) {
	srv, _ := newServer(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, api.TokenFile), []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOOTFLEET_SERVER", srv.Listener.Addr().String()) // no scheme: http is assumed
	t.Setenv("BOOTFLEET_TOKEN", "")
	if out := run(t, "profile", "add", "p", "--kernel", "/k", "--data", data); out != "added profile p\nname:    p\nkernel:  /k\ncmdline: -\nsource:  api\n" {
		t.Fatalf("with the data directory's token: %q", out)
	}
	t.Setenv("BOOTFLEET_TOKEN", testToken)
	if out := run(t, "profile", "rm", "p", "--data", t.TempDir()); out != "removed profile p\n" {
		t.Fatalf("with BOOTFLEET_TOKEN: %q", out)
	}
}
