package httpboot

import (
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

func TestGroupHealth(t *testing.T) {
	a, _ := net.ParseMAC("52:54:00:00:00:0a")
	b, _ := net.ParseMAC("52:54:00:00:00:0b")
	report := func(group, mc, fb string) url.Values {
		return url.Values{"group": {group}, "multicast": {mc}, "fallbacks": {fb}, "unicast": {"1"}}
	}
	for _, tt := range []struct {
		name         string
		reports      []url.Values // all from a
		wantA, wantB bool
	}{
		{"nothing heard: try the group", nil, true, true},
		{"silent", []url.Values{report("silent", "0", "1")}, false, false},
		{"waited in vain before silence", []url.Values{report("on", "0", "3")}, false, false},
		{"delivered", []url.Values{report("on", "4096", "0")}, true, true},
		{"lossy but delivered", []url.Values{report("lossy", "4096", "9")}, true, true},
		{"off says nothing", []url.Values{report("silent", "0", "1"), report("off", "0", "0")}, false, false},
		{"nothing to tell yet", []url.Values{report("silent", "0", "1"), report("on", "0", "0")}, false, false},
		{"delivers again", []url.Values{report("silent", "0", "1"), report("on", "1", "0")}, true, true},
		{"a bad count says nothing", []url.Values{report("on", "x", "0")}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGroupHealth()
			for _, q := range tt.reports {
				g.Observe(a, q)
			}
			if got := g.Delivers(a); got != tt.wantA {
				t.Errorf("Delivers(reporting machine) = %v, want %v", got, tt.wantA)
			}
			if got := g.Delivers(b); got != tt.wantB {
				t.Errorf("Delivers(another machine) = %v, want %v", got, tt.wantB)
			}
		})
	}
	t.Run("a machine's own report wins over the latest", func(t *testing.T) {
		g := NewGroupHealth()
		g.Observe(a, report("silent", "0", "1"))
		g.Observe(b, report("on", "8192", "0"))
		if g.Delivers(a) || !g.Delivers(b) {
			t.Fatalf("Delivers(a) = %v, Delivers(b) = %v: want each machine's own verdict", g.Delivers(a), g.Delivers(b))
		}
	})
}

// TestScriptDropsMTFTPWhereTheGroupIsDropped: a root-io report saying
// the group delivered nothing takes mtftp:// out of that machine's next
// script (and others', until they say otherwise); a report saying it
// delivered puts it back.
func TestScriptDropsMTFTPWhereTheGroupIsDropped(t *testing.T) {
	const self = "http://10.0.0.1:8080"
	v := newView(t, mtftpInput(t))
	c := Config{Fleet: v, Boots: noClock{}, BaseURL: self, ServerIP: "10.0.0.1", Roots: pinnedRoots{oldSHA},
		MTFTP: &granter{yes: map[string]bool{"profiles/dl/kernel": true}}, Groups: NewGroupHealth(), Milestones: noMilestones{}}
	srv := httptest.NewServer(New(c))
	defer srv.Close()
	named := func(mac string) bool {
		t.Helper()
		status, body := get(t, srv.URL+"/ipxe/"+mac)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		return strings.Contains(body, "mtftp://")
	}
	reportIO := func(mac, q string) {
		t.Helper()
		if status, body := get(t, srv.URL+"/milestone/"+mac+"/root-io?"+q); status != 200 {
			t.Fatalf("root-io report: status %d: %s", status, body)
		}
	}
	const m1, m2 = "52-54-00-00-00-01", "52-54-00-00-00-05"
	if !named(m1) {
		t.Fatal("no report yet: the script does not name mtftp://")
	}
	reportIO(m1, "multicast=0&unicast=900&hits=0&misses=900&written=0&fallbacks=2&group=on")
	if named(m1) || named(m2) {
		t.Fatal("after a report of a group that delivered nothing, scripts still name mtftp://")
	}
	reportIO(m2, "multicast=65536&unicast=0&hits=0&misses=65536&written=0&fallbacks=0&group=on")
	if !named(m2) || named(m1) {
		t.Fatalf("after m2 said the group delivers: m2 named %v, m1 named %v; want m2 given it, m1 kept to its own report", named(m2), named(m1))
	}
}

// mtftpInput is a fleet of two machines of one diskless profile with a
// local kernel.
func mtftpInput(t *testing.T) machineview.Input {
	kernel := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(kernel, make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	root := inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}
	return machineview.Input{
		Profiles: map[string]inventory.Profile{"dl": {Name: "dl", Kernel: kernel, Cmdline: "quiet", Root: root}},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "dl"), enrolled("52:54:00:00:00:05", "", "dl")},
	}
}
