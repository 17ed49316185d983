package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
)

// TestCheckPins: bootfleet check refuses a profile or machine pinned to a
// version the inventory's image lacks, listing the versions; before the
// inventory exists it checks nothing and makes nothing.
func TestCheckPins(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "bootfleet.yaml")
	write := func(profilePin, machinePin string) {
		y := "dhcp: {mode: off}\nserver_ip: 10.0.0.1\ndata: " + data + "\nprofiles:\n  lab: {kernel: /k, root: {image: lab, channel: \"" + profilePin + "\"}}\n" +
			"machines:\n  - {mac: \"52:54:00:00:00:01\", profile: lab, root_channel: \"" + machinePin + "\"}\n"
		if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("7", "")
	if out := run(t, "check", "--config", cfg); !strings.HasSuffix(out, ": ok\n") || strings.Contains(out, "version pins") {
		t.Fatalf("check before the inventory exists: %q, want ok with pins not checked", out)
	}
	if _, err := os.Stat(filepath.Join(data, sqlite.FileName)); err == nil {
		t.Fatal("check made the inventory")
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	storetest.AddVersions(t, st, "lab", inventory.VersionProduction, inventory.VersionTest)
	st.Close()
	for _, tc := range []struct{ profilePin, machinePin, want string }{
		{"7", "", "profiles.lab.root.channel: image lab has no version 7; its versions are 1 (production), 2 (test)"},
		{"", "3", "machines[0].root_channel: image lab has no version 3; its versions are 1 (production), 2 (test)"},
		{"2", "1", "version pins: checked against the inventory's image versions"},
	} {
		write(tc.profilePin, tc.machinePin)
		if out := run(t, "check", "--config", cfg); !strings.Contains(out, tc.want) {
			t.Errorf("check with profile pin %q, machine pin %q: %q, want %q", tc.profilePin, tc.machinePin, out, tc.want)
		}
	}
}
