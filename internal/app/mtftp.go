package app

import (
	"log/slog"
	"net/netip"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/mtftp"
	"github.com/bootfleet/bootfleet/internal/tftp"
	"github.com/bootfleet/bootfleet/internal/ukicache"
)

// newMTFTP is the PXE MTFTP responder for kernels of diskless profiles:
// nil when multicast.mtftp is off, when the multicast root is (mc nil:
// multicast.mode off, NBD off, no IPv4 address) or TFTP is, since iPXE's
// own fallback from mtftp:// is plain TFTP of the same path. It sends
// from the multicast root's interface, TTL and rate, each paced apart.
func newMTFTP(c *config.Config, mc *diskless.Multicast, fs tftp.FileSystem, log *slog.Logger) (*mtftp.Server, error) {
	if mc == nil || !c.Multicast.MTFTPOn() || c.TFTP.Listen == "off" {
		return nil, nil
	}
	group, err := c.Multicast.MTFTPGroupAddr()
	if err != nil {
		return nil, err
	}
	return mtftp.New(mtftp.Config{FS: fs, Listen: netip.AddrPortFrom(mc.Listen.Addr(), uint16(c.Multicast.MTFTPPort)),
		Group: group, Interface: mc.Interface, TTL: mc.TTL, Rate: mc.Rate, Logger: log}), nil
}

// newUKIs is the cache of unified kernel images that UEFI machines take
// by mtftp://, under DATA/uki: nil (the kernel alone by MTFTP) when MTFTP
// is off or multicast.uki_stub is missing, which is logged once here.
func newUKIs(c *config.Config, log *slog.Logger) httpboot.UKIs {
	if !c.Multicast.MTFTPOn() || c.TFTP.Listen == "off" {
		return nil
	}
	u := ukicache.New(filepath.Join(c.Data, "uki"), c.Multicast.UKIStub, log)
	if err := u.Stub(); err != nil {
		log.Warn("no unified kernel images: UEFI machines take only the kernel by mtftp://, the initrds by HTTP", "err", err)
		return nil
	}
	return u
}

// mtftpCollectors are the responder's series for /metrics.
func mtftpCollectors(s *mtftp.Server) []prometheus.Collector {
	st := func(f func(mtftp.Stats) uint64) func() float64 {
		return func() float64 { return float64(f(s.Stats())) }
	}
	counter := func(name, help string, f func(mtftp.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_mtftp_" + name, Help: help}, st(f))
	}
	return []prometheus.Collector{
		counter("sent_bytes_total", "File bytes of the PXE MTFTP DATA sent to the group (headers not counted).", func(x mtftp.Stats) uint64 { return x.Bytes }),
		counter("sent_datagrams_total", "PXE MTFTP DATA datagrams sent to the group.", func(x mtftp.Stats) uint64 { return x.Datagrams }),
		counter("cycles_total", "Full cycles of a file the MTFTP carousel sent.", func(x mtftp.Stats) uint64 { return x.Cycles }),
		counter("requests_total", "MTFTP read requests received.", func(x mtftp.Stats) uint64 { return x.Requests }),
		counter("clients_total", "Distinct client addresses that sent an MTFTP read request.", func(x mtftp.Stats) uint64 { return x.Clients }),
		counter("errors_total", "TFTP ERRORs sent to MTFTP clients: another file owns the group, the file is missing or too large.", func(x mtftp.Stats) uint64 { return x.Errors }),
		counter("master_copies_total", "Unicast copies of a DATA that make a client iPXE's master client, which ACKs its first missing block.", func(x mtftp.Stats) uint64 { return x.Unicasts }),
		counter("stalls_total", "Master clients dropped for getting nothing from the group but the copies: the network keeps the group from iPXE, and scripts name no mtftp:// for a while.", func(x mtftp.Stats) uint64 { return x.Stalls }),
	}
}
