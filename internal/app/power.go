package app

import (
	"log/slog"
	"net"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/power/ipmi"
	"github.com/bootfleet/bootfleet/internal/power/redfish"
	"github.com/bootfleet/bootfleet/internal/power/schedule"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// newPower is the runner of power commands with every driver: magic
// packets leave by the boot interface, where the machines DHCP. The boots
// its commands start carry them in their records.
func newPower(c *config.Config, rec *telemetry.Recorder, log *slog.Logger) *power.Runner {
	return &power.Runner{Drivers: map[string]power.Driver{
		inventory.DriverWOL:     power.WOL{Interface: c.Interface},
		inventory.DriverIPMI:    ipmi.Driver{},
		inventory.DriverRedfish: redfish.Driver{},
	}, Logger: log.With("part", "power"),
		Powered: func(mac net.HardwareAddr, a power.Action, cause string) { rec.Powered(mac, string(a), cause) }}
}

// newSchedules is the config's power schedules over the runner, their
// runs in the audit trail and /metrics.
func newSchedules(c *config.Config, store inventory.Store, pw *power.Runner, rec *telemetry.Recorder, server string,
	log *slog.Logger) (*schedule.Scheduler, error) {
	entries, err := schedule.FromConfig(c.Schedules)
	if err != nil {
		return nil, err
	}
	return schedule.New(schedule.Config{Entries: entries, Runner: pw, Store: store, Server: server,
		Registerer: rec.Registerer(), Logger: log.With("part", "schedule")})
}
