package cli

import (
	"context"
	"net"
	"testing"

	"github.com/bootfleet/bootfleet/internal/api"
)

// noDisks resets nothing and records what it was asked to reset.
type noDisks struct{ reset []string }

func (d *noDisks) Reset(mac net.HardwareAddr, force bool) error {
	d.reset = append(d.reset, mac.String())
	return nil
}

// fromOne moves every persistent machine from version 1 of lab to 2.
type fromOne struct{}

func (fromOne) Migration(context.Context, net.HardwareAddr) (api.VersionMove, bool, error) {
	return api.VersionMove{Image: "lab", From: 1, To: 2}, true, nil
}

// TestMachineResetMigrate: machine reset of a persistent machine on an
// older version prints the server's refusal, saying what is lost;
// --migrate resets it and says which version it boots next.
func TestMachineResetMigrate(t *testing.T) {
	disks := &noDisks{}
	srv, _ := newServer(t, func(c *api.Config) { c.Disks, c.Migrations = disks, fromOne{} })
	conn := []string{"--server", srv.URL, "--token", testToken, "--data", t.TempDir()}
	const refused = "error: migrate: machine 52:54:00:00:00:07's persistent overlay was made on version 1 of image lab and the machine now boots version 2: " +
		"a reset discards everything the machine wrote to its disk and moves it to version 2; pass --migrate (migrate=true) if that is wanted\n"
	if out := run(t, append([]string{"machine", "reset", "52:54:00:00:00:07"}, conn...)...); out != refused || len(disks.reset) != 0 {
		t.Fatalf("reset without --migrate printed %q and reset %v; want %q and nothing reset", out, disks.reset, refused)
	}
	const moved = "reset machine 52:54:00:00:00:07: overlay discarded\nit boots version 2 of image lab next (its overlay was on version 1)\n"
	if out := run(t, append([]string{"machine", "reset", "52:54:00:00:00:07", "--migrate"}, conn...)...); out != moved || len(disks.reset) != 1 {
		t.Fatalf("reset --migrate printed %q and reset %v; want %q and one reset", out, disks.reset, moved)
	}
}
