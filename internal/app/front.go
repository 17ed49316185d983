package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/power/schedule"
	"github.com/bootfleet/bootfleet/internal/telemetry"
	"github.com/bootfleet/bootfleet/internal/web"
)

// newAPI builds the REST API with the token from the data directory.
// onChange runs after each write to machines or profiles.
func newAPI(c *config.Config, store inventory.Store, onChange func(), images api.ImageService, disks api.DiskResetter,
	mig api.MigrationChecker, boots api.BootSource, ids api.IdentityService, pw *power.Runner, sched *schedule.Scheduler, log *slog.Logger) (http.Handler, error) {
	tok, err := api.LoadOrCreateToken(c.Data)
	if err != nil {
		return nil, err
	}
	return api.New(api.Config{Store: store, Token: tok, OpenReads: c.API.OpenReads, OnChange: onChange,
		Images: images, Disks: disks, Migrations: mig, Boots: boots, Identities: ids, Power: pw, Schedules: sched, MaintenanceProfile: c.MaintenanceProfile, Logger: log})
}

// migrations answers which version a reset moves a persistent machine
// to: the root its profile (and its own channel) gives it in view.
type migrations struct {
	view *machineview.View
	dl   *diskless.Service
}

func (m migrations) Migration(ctx context.Context, mac net.HardwareAddr) (api.VersionMove, bool, error) {
	t, ok := m.view.Resolve(mac)
	if !ok {
		return api.VersionMove{}, false, nil
	}
	mv, moves, err := m.dl.Migration(ctx, mac, t.Spec.Root)
	return api.VersionMove{Image: mv.Image, From: mv.From, To: mv.To}, moves, err
}

// frontHandler is the HTTP server's one handler: /metrics, the dashboard,
// the API under /api/v1/, and the HTTP boot paths (boot) for the rest.
func frontHandler(rec *telemetry.Recorder, apiHandler, boot http.Handler) http.Handler {
	return routes(rec.Handler(), apiHandler, web.Handler(), boot)
}
