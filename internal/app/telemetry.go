package app

import (
	"log/slog"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/telemetry"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// endedQueue is how many ended boots may wait for the history's writer:
// a storm of a few thousand machines ending at once fits.
const endedQueue = 4096

// newHistory returns the boot recorder and the history that reads the
// inventory's boot records and keeps them within the retention of
// c.Boots. With telemetry on, the recorder's ended boots are stored
// there; on a shared store it is named after the fleet member, so the
// boots that several servers serve read as one. With telemetry off it
// stores nothing: its boots stay in memory.
func newHistory(c *config.Config, store inventory.BootRecords, name string, log *slog.Logger) (*telemetry.Recorder, *telemetry.History) {
	var cfg telemetry.Config
	if c.Telemetry != "off" {
		cfg.Ended = endedQueue
		if inventorysvc.Shared(c.Store) {
			cfg.Server = name
		}
	}
	rec := telemetry.New(cfg)
	return rec, telemetry.NewHistory(rec, telemetry.HistoryConfig{Store: store,
		MaxAge: time.Duration(c.Boots.MaxAge), MaxCount: c.Boots.MaxCount, Logger: log})
}

// taps are where the servers report to telemetry. With telemetry: off
// only the boot clock runs, the recorder hearing each DHCP packet and
// DoneURL call, so `make bench` can measure what recording the rest
// costs.
type taps struct {
	boots      httpboot.BootClock
	transfers  httpboot.TransferObserver
	milestones httpboot.MilestoneRecorder
	rootIO     httpboot.RootIORecorder
	tftp       func(tftp.TransferStats)
	dhcp       dhcp.Observer
	dhcpReply  func(dhcp.Reply)
	nbd        func(net.HardwareAddr, nbd.SessionStats)
	noBoot     func(net.HardwareAddr, string) // the firmware got no boot file, and why
}

func telemetryTaps(c *config.Config, rec *telemetry.Recorder, log *slog.Logger) taps {
	if c.Telemetry == "off" {
		return taps{boots: rec, tftp: logTransfer(log), dhcp: rec, noBoot: rec.NoBoot}
	}
	return taps{
		boots:      rec,
		transfers:  rec,
		milestones: rec,
		rootIO:     rec,
		tftp:       rec.OnTransfer(logTransfer(log)),
		dhcp:       rec,
		dhcpReply:  rec.DHCPReply,
		nbd:        rec.NBDSession,
		noBoot:     rec.NoBoot,
	}
}

// logTransfer logs each finished TFTP transfer.
func logTransfer(log *slog.Logger) func(tftp.TransferStats) {
	return func(st tftp.TransferStats) {
		attrs := []any{"remote", st.Remote.String(), "file", st.Filename, "bytes", st.Bytes,
			"seconds", st.Duration.Round(time.Millisecond).Seconds(),
			"blksize", st.BlockSize, "windowsize", st.WindowSize, "retransmits", st.Retransmits}
		if st.Group != "" {
			attrs = append(attrs, "group", st.Group)
		}
		if st.Silent {
			// A multicast listener made master after it had the whole file.
			log.Debug("tftp multicast client silent", attrs...)
			return
		}
		if st.SizeProbe {
			// UEFI firmware asks for tsize and aborts before every download.
			log.Debug("tftp size probe", attrs...)
			return
		}
		if st.Err != nil {
			log.Warn("tftp transfer failed", append(attrs, "err", st.Err.Error())...)
			return
		}
		mbps := 0.0
		if st.Duration > 0 {
			mbps = float64(st.Bytes) / st.Duration.Seconds() / 1e6
		}
		log.Info("tftp transfer done", append(attrs, "mbps", float64(int(mbps*100))/100)...)
	}
}
