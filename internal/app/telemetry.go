package app

import (
	"log/slog"
	"net"
	"net/http"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/boots"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/telemetry"
	"github.com/bootfleet/bootfleet/internal/tftp"
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

// taps are where the servers report to telemetry. With telemetry: off they
// are the plain hooks the servers need anyway (logging, boot timing), so
// `make bench` can measure what recording costs.
type taps struct {
	boots      httpboot.BootClock
	transfers  httpboot.TransferObserver
	milestones httpboot.MilestoneRecorder
	tftp       func(tftp.TransferStats)
	dhcp       dhcp.Observer
	dhcpReply  func(dhcp.Reply)
	nbd        func(net.HardwareAddr, nbd.SessionStats)
}

func telemetryTaps(c *config.Config, rec *telemetry.Recorder, tracker *boots.Tracker, log *slog.Logger) taps {
	if c.Telemetry == "off" {
		return taps{boots: tracker, tftp: logTransfer(log), dhcp: bootObserver{tracker}}
	}
	return taps{
		boots:      rec.BootClock(tracker),
		transfers:  rec,
		milestones: rec,
		tftp:       rec.OnTransfer(logTransfer(log)),
		dhcp:       rec.Observer(bootObserver{tracker}),
		dhcpReply:  rec.DHCPReply,
		nbd:        rec.NBDSession,
	}
}
