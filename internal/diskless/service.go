package diskless

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/imagekernel"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Config configures a Service.
type Config struct {
	// Data is the data directory: image content, overlays and built
	// kernels live under it. Required.
	Data string
	// Listen is nbd.listen, the NBD server's TCP address, or "off" to
	// serve no NBD.
	Listen string
	// ServerIP is the address scripts give machines for the NBD server.
	ServerIP net.IP
	// Agent is nbd.agent, the bootfleet-agent binary that kernels built
	// from images get in their initramfs.
	Agent string
	// NICDrivers is nbd.nic_drivers, for those initramfs images.
	NICDrivers []string
	// Images maps image names to content; required.
	Images Images
	// Leases, if set, ties each export to the address DHCP leased its
	// machine.
	Leases rootdisk.LeaseLookup
	// BaseKey keys the read-only base exports of client overlays; every
	// server of the fleet must have the same (rootdisk.BaseKeyName).
	BaseKey []byte
	// Multicast, if set, multicasts every root's base content
	// (multicast.go); nil reads roots by unicast only.
	Multicast *Multicast
	Logger    *slog.Logger // default: discard
}

// Service is the diskless-root service of a running server.
type Service struct {
	disks   *rootdisk.Manager
	kernels *imagekernel.Builder // boot files of root.kernel: image profiles
	images  Images
	ln      net.Listener // nil when Listen is off
	log     *slog.Logger
	blobs   *imagestore.Store
	fetcher Fetcher      // nil: serve only what is here
	mc      *multicaster // nil: multicast off
	// order learns the read order of contents; nil when multicast is off,
	// the only user of it.
	order *readorder.Learner
}

// New opens the image content and, unless cfg.Listen is off, the NBD
// listener, so a taken port fails start-up before anything else runs.
// Call Close when done.
func New(cfg Config) (*Service, error) {
	if cfg.Data == "" || cfg.Images == nil {
		return nil, errors.New("diskless: Config.Data and Config.Images are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	blobs, err := imagestore.Open(cfg.Data)
	if err != nil {
		return nil, err
	}
	s := &Service{images: cfg.Images, log: cfg.Logger, blobs: blobs}
	s.disks, err = rootdisk.New(rootdisk.Config{Data: cfg.Data, Blobs: blobs, Leases: cfg.Leases, BaseKey: cfg.BaseKey, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	s.kernels, err = imagekernel.New(imagekernel.Config{Dir: filepath.Join(cfg.Data, "kernels"), Blobs: blobs,
		Agent: cfg.Agent, NICDrivers: cfg.NICDrivers, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if cfg.Listen == "off" {
		return s, nil
	}
	if cfg.Multicast != nil {
		s.order = readorder.NewLearner(filepath.Join(cfg.Data, "images", "order"), cfg.Logger)
		if s.mc, err = newMulticaster(*cfg.Multicast, s.order, cfg.Logger); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("nbd: listen on %s: %w (is the port taken? set nbd.listen, or off to disable diskless roots)", cfg.Listen, err)
	}
	_, p, _ := net.SplitHostPort(s.ln.Addr().String())
	port, _ := strconv.Atoi(p)
	s.disks.SetAddr(cfg.ServerIP.String(), port)
	return s, nil
}

// Serve runs the NBD server until ctx ends; with Listen off it returns at
// once. onSession, if set, gets every finished session with the machine
// its export names (nil if it names none).
func (s *Service) Serve(ctx context.Context, onSession func(net.HardwareAddr, nbd.SessionStats)) error {
	if s.ln == nil {
		return nil
	}
	cfg := nbd.Config{Logger: s.log, ExportLabel: rootdisk.LogLabel}
	if onSession != nil {
		cfg.Hook = sessionHook(onSession)
	}
	srv := nbd.NewServer(fetchingExports{s}, cfg)
	if s.mc == nil {
		return srv.Serve(ctx, s.ln)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.mc.run(ctx) })
	g.Go(func() error { return srv.Serve(ctx, s.ln) })
	return g.Wait()
}

// sessionHook hands finished NBD sessions on with the machine the export
// name names.
type sessionHook func(net.HardwareAddr, nbd.SessionStats)

func (h sessionHook) OnSession(st nbd.SessionStats) {
	mac := rootdisk.MachineOf(st.Export)
	st.Export = rootdisk.LogLabel(st.Export) // boot records are readable through the API
	h(mac, st)
}

// Close runs once Serve has returned: it closes the listener, waits for
// kernel builds (which have an image mounted) and closes the base images
// left open for the next boot.
func (s *Service) Close() {
	if s.ln != nil {
		s.ln.Close()
	}
	if s.mc != nil {
		s.mc.close()
	}
	if s.order != nil {
		s.order.Flush()
	}
	s.kernels.Close()
	if err := s.disks.Close(); err != nil {
		s.log.Warn("closing base images failed", "err", err)
	}
}

// Sessions is the number of NBD sessions open now, for the fleet's load.
func (s *Service) Sessions() int { return s.disks.OpenSessions() }

// Kernels is the boot files built from images, for root.kernel: image
// profiles, fetching the image from a peer first when it is not here.
func (s *Service) Kernels() httpboot.ImageKernels { return fetchingKernels{s.kernels, s} }

// Disks answers which image content a machine of this server boots from,
// for the images service's rules.
func (s *Service) Disks() *rootdisk.Manager { return s.disks }

// KernelFiles is the kernel builder itself, whose files the images
// service deletes with their content.
func (s *Service) KernelFiles() *imagekernel.Builder { return s.kernels }

// Reset discards mac's overlay; see rootdisk.Manager.Reset.
func (s *Service) Reset(mac net.HardwareAddr, force bool) error { return s.disks.Reset(mac, force) }
