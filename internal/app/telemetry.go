package app

import (
	"log/slog"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/boots"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/telemetry"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// endedQueue is how many ended boots may wait for the history's writer:
// a storm of a few thousand machines ending at once fits.
const endedQueue = 4096

// newHistory returns the boot recorder and the history that stores its
// ended boots in the inventory, with the retention of c.Boots. On a
// shared store the recorder is the fleet member name, so the boots that
// several servers serve read as one.
func newHistory(c *config.Config, store inventory.BootRecords, name string, log *slog.Logger) (*telemetry.Recorder, *telemetry.History) {
	cfg := telemetry.Config{Ended: endedQueue}
	if inventorysvc.Shared(c.Store) {
		cfg.Server = name
	}
	rec := telemetry.New(cfg)
	return rec, telemetry.NewHistory(rec, telemetry.HistoryConfig{Store: store,
		MaxAge: time.Duration(c.Boots.MaxAge), MaxCount: c.Boots.MaxCount, Logger: log})
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

// bootObserver starts a machine's boot clock at its first DHCP packet.
type bootObserver struct{ tr *boots.Tracker }

func (o bootObserver) DHCPPacket(mac net.HardwareAddr, _ dhcpv4.MessageType, _ pxe.Client) {
	o.tr.DHCPSeen(mac)
}

// logTransfer logs each finished TFTP transfer.
func logTransfer(log *slog.Logger) func(tftp.TransferStats) {
	return func(st tftp.TransferStats) {
		attrs := []any{"remote", st.Remote.String(), "file", st.Filename, "bytes", st.Bytes,
			"seconds", st.Duration.Round(time.Millisecond).Seconds(),
			"blksize", st.BlockSize, "windowsize", st.WindowSize, "retransmits", st.Retransmits}
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
