package app

import (
	"log/slog"
	"net/http"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/telemetry"
	"github.com/bootfleet/bootfleet/internal/web"
)

// frontHandler puts /metrics, the boots API and the dashboard in front of
// the inventory API (/api/v1/) and the HTTP boot paths (boot).
func frontHandler(c *config.Config, rec *telemetry.Recorder, inv *Inventory, boot http.Handler, log *slog.Logger) (http.Handler, error) {
	tok, err := api.LoadOrCreateToken(c.Data)
	if err != nil {
		return nil, err
	}
	boots, err := api.NewBoots(api.BootsConfig{Boots: rec, Token: tok, OpenReads: c.API.OpenReads, Logger: log})
	if err != nil {
		return nil, err
	}
	dash := web.Handler()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", rec.Handler())
	mux.Handle(api.Prefix+"/boots", boots)
	mux.Handle(api.Prefix+"/boots/", boots)
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /ui/", dash)
	mux.Handle("/", inv.Handler(boot))
	return mux, nil
}
