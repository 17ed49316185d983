package api

import (
	"context"
	"net"
	"strings"
	"testing"
)

// moveOf is a MigrationChecker that moves every machine as mv.
type moveOf struct{ mv VersionMove }

func (m moveOf) Migration(context.Context, net.HardwareAddr) (VersionMove, bool, error) {
	return m.mv, true, nil
}

// TestResetMigrate: a reset that would move a persistent machine to
// another version is refused without migrate=true, naming what is lost
// and the versions, and nothing is reset; with it the overlay is reset
// and the move answered. A migrate that is not a boolean is refused.
func TestResetMigrate(t *testing.T) {
	disks := &resetDisks{}
	e := newEnv(t, false, func(c *Config) {
		c.Disks, c.Migrations = disks, moveOf{VersionMove{Image: "deb", From: 0, To: 3}}
	})
	var eb ErrorBody
	e.mustDo(t, "POST", "/machines/52:54:00:00:00:01/reset", "", 409, &eb)
	if eb.Field != "migrate" || !strings.Contains(eb.Error, "content of image deb that no version names any more") ||
		!strings.Contains(eb.Error, "discards everything the machine wrote to its disk and moves it to version 3") || len(disks.reset) != 0 {
		t.Fatalf("reset without migrate: %+v, reset %v; want a refusal saying what is lost, nothing reset", eb, disks.reset)
	}
	e.mustDo(t, "POST", "/machines/52:54:00:00:00:01/reset?migrate=maybe", "", 400, &eb)
	if eb.Field != "migrate" {
		t.Fatalf("migrate=maybe: %+v, want field migrate", eb)
	}
	var res ResetResult
	e.mustDo(t, "POST", "/machines/52:54:00:00:00:01/reset?migrate=true", "", 200, &res)
	if res.Migrated == nil || *res.Migrated != (VersionMove{Image: "deb", To: 3}) || len(disks.reset) != 1 {
		t.Fatalf("reset with migrate: %+v, reset %v; want the move to 3 and one reset", res, disks.reset)
	}
}
