package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNextBoot: bootfleet machine next-boot takes effect once and
// reverts, seen in two consecutive boots of one VM: the first boots the
// override's profile and its boot record says next-boot; the second boots
// the machine's own profile and its record says nothing of the kind.
func TestNextBoot(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	data := filepath.Join(t.TempDir(), "data")
	server := startInventoryServer(t, e, lan, dir, data)
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}

	const mac = "52:54:00:e2:b1:01"
	cli.run("machine", "add", "--mac", mac, "--name", "nb1", "--profile", labProfile)
	cli.run("machine", "next-boot", "nb1", defaultProfile)

	first := boot(t, e, lan, dir, server, vm{fw: bios, mac: mac, tap: "tap0"})
	checkProfile(t, first.cmdline, defaultProfile)
	if out := string(cli.run("machine", "next-boot", "nb1")); !strings.Contains(out, "no next boot override") {
		t.Errorf("after the first boot, machine next-boot shows %q; want the override gone", out)
	}
	second := boot(t, e, lan, dir, server, vm{fw: bios, mac: mac, tap: "tap0"})
	checkProfile(t, second.cmdline, labProfile)

	var boots []struct {
		ID         string                  `json:"id"`
		State      string                  `json:"state"`
		Milestones []struct{ Name string } `json:"milestones"`
	}
	cli.json(&boots, "boots", "--machine", mac)
	if len(boots) != 2 {
		t.Fatalf("boots --machine %s: %d records, want the two boots: %+v", mac, len(boots), boots)
	}
	took := func(i int) bool {
		for _, m := range boots[i].Milestones {
			if m.Name == "next-boot-"+defaultProfile {
				return true
			}
		}
		return false
	}
	// Newest first: boots[1] is the first boot.
	if !took(1) || took(0) {
		t.Fatalf("next-boot milestones: first boot %t, second %t; want only the first (records %+v)", took(1), took(0), boots)
	}
	for _, b := range boots {
		if b.State != "complete" {
			t.Errorf("boot %s: state %s, want complete", b.ID, b.State)
		}
	}
}
