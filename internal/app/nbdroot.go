package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/imagekernel"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// diskless wires the diskless-root service: image content in the data
// directory, per-boot exports, and the NBD server that serves them.
type diskless struct {
	disks   *rootdisk.Manager
	kernels *imagekernel.Builder // boot files of root.kernel: image profiles
	leases  *leaseIPs
	ln      net.Listener // nil when nbd.listen is off
	log     *slog.Logger
}

// newDiskless opens the image store and, unless nbd.listen is off, the NBD
// listener, so a taken port fails start-up before anything else runs.
// Call attach once the inventory is open.
func newDiskless(c *config.Config, serverIP net.IP, log *slog.Logger) (*diskless, error) {
	blobs, err := imagestore.Open(c.Data)
	if err != nil {
		return nil, err
	}
	d := &diskless{leases: &leaseIPs{}, log: log}
	d.disks, err = rootdisk.New(rootdisk.Config{Data: c.Data, Blobs: blobs, Leases: d.leases, Logger: log})
	if err != nil {
		return nil, err
	}
	d.kernels, err = imagekernel.New(imagekernel.Config{Dir: filepath.Join(c.Data, "kernels"), Blobs: blobs,
		Agent: c.NBD.Agent, Logger: log})
	if err != nil {
		return nil, err
	}
	if c.NBD.Listen == "off" {
		return d, nil
	}
	d.ln, err = net.Listen("tcp", c.NBD.Listen)
	if err != nil {
		return nil, fmt.Errorf("nbd: listen on %s: %w (is the port taken? set nbd.listen, or off to disable diskless roots)", c.NBD.Listen, err)
	}
	port, _ := strconv.Atoi(portOf(d.ln.Addr()))
	d.disks.SetAddr(serverIP.String(), port)
	return d, nil
}

// attach gives the service the inventory: image names and DHCP leases.
func (d *diskless) attach(inv *Inventory) { d.leases.store = inv.Store() }

// serve runs the NBD server until ctx ends; without a listener it returns
// at once.
func (d *diskless) serve(ctx context.Context, onSession func(net.HardwareAddr, nbd.SessionStats)) error {
	if d.ln == nil {
		return nil
	}
	cfg := nbd.Config{Logger: d.log, ExportLabel: rootdisk.LogLabel}
	if onSession != nil {
		cfg.Hook = sessionHook(onSession)
	}
	return nbd.NewServer(d.disks, cfg).Serve(ctx, d.ln)
}

// sessionHook hands finished NBD sessions to telemetry with the machine
// the export name names (nil if it names none).
type sessionHook func(net.HardwareAddr, nbd.SessionStats)

func (h sessionHook) OnSession(st nbd.SessionStats) {
	mac, _, err := rootdisk.ParseExportName(st.Export)
	if err != nil {
		mac = nil
	}
	st.Export = rootdisk.LogLabel(st.Export) // boot records are readable through the API
	h(mac, st)
}

// close runs once the NBD server has stopped: it closes the listener,
// waits for kernel builds (which have an image mounted) and closes the
// base images left open for the next boot.
func (d *diskless) close() {
	if d.ln != nil {
		d.ln.Close()
	}
	d.kernels.Close()
	if err := d.disks.Close(); err != nil {
		d.log.Warn("closing base images failed", "err", err)
	}
}

// rootArgs is the httpboot.Roots of a running server: it resolves the image
// name at render time, so the boot pins the content the name has now.
type rootArgs struct {
	store inventory.Images
	disks *rootdisk.Manager
}

func (r rootArgs) IssueRoot(ctx context.Context, mac net.HardwareAddr, root config.Root) (httpboot.RootBoot, error) {
	img, err := r.store.GetImage(ctx, root.Image)
	if err != nil {
		return httpboot.RootBoot{}, fmt.Errorf("root image: %w", err)
	}
	b, err := r.disks.IssueBoot(mac, img, root.Overlay)
	if err != nil {
		return httpboot.RootBoot{}, err
	}
	return httpboot.RootBoot{Arg: b.Root, Image: img.Name, SHA256: b.SHA256}, nil
}

// imageFiles is the API's image content: the disks' blobs, and the kernels
// built from them, which go with the content they were built from.
type imageFiles struct {
	*rootdisk.Manager
	kernels *imagekernel.Builder
	log     *slog.Logger
}

func (f imageFiles) Release(sha string) (bool, error) {
	deleted, err := f.Manager.Release(sha)
	if deleted && err == nil {
		if err := f.kernels.Remove(sha); err != nil {
			f.log.Warn("image kernel files kept", "sha256", sha, "err", err)
		}
	}
	return deleted, err
}

// prepareKernels starts building, in the background, the boot files of
// the images that root.kernel: image profiles name, so the first boot of a
// new image version need not wait for them. It runs after every fleet view
// reload: at start, after API writes such as an image import, and on the
// reloads of a shared store.
func (d *diskless) prepareKernels(store inventory.Images, fc *config.Config) {
	var names []string
	for _, p := range fc.Profiles {
		if p.Root.Kernel == config.RootKernelImage && !slices.Contains(names, p.Root.Image) {
			names = append(names, p.Root.Image)
		}
	}
	if len(names) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range names {
			img, err := store.GetImage(ctx, name)
			if err != nil {
				continue // not imported yet: its profile's scripts say so
			}
			d.kernels.Prepare(img.Name, img.SHA256)
		}
	}()
}

// leaseIPs answers rootdisk's lease checks from the inventory's leases.
type leaseIPs struct {
	store inventory.Leases // nil until attach
}

func (l *leaseIPs) LeaseIP(mac net.HardwareAddr) (net.IP, bool) {
	if l.store == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ls, err := l.store.ListLeases(ctx)
	if err != nil {
		return nil, false
	}
	now := time.Now()
	for _, le := range ls {
		if le.MAC.String() == mac.String() && le.Expiry.After(now) {
			return le.IP, true
		}
	}
	return nil, false
}
