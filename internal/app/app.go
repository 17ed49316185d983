package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/membership"
	"github.com/bootfleet/bootfleet/internal/ndp"
	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
	"github.com/bootfleet/bootfleet/internal/safefs"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// Run starts every service c enables and blocks until ctx is done or one of
// them fails; then it stops the others and returns the first error.
func Run(ctx context.Context, c *config.Config, log *slog.Logger) error {
	if err := os.MkdirAll(c.Data, 0o750); err != nil {
		return fmt.Errorf("data directory: %w (set data to a writable directory)", err)
	}
	serverIP, err := resolveServerIP(c)
	if err != nil {
		return err
	}
	roots, err := servedRoots(c)
	if err != nil {
		return err
	}
	defer roots.Close()
	store, err := inventorysvc.OpenStore(ctx, c.Store, c.Data)
	if err != nil {
		return err
	}
	defer store.Close()
	leases := inventorysvc.NewLeases(store) // DHCP writes them, NBD checks them
	// Every server of the fleet names read-only base exports with one key.
	baseKey, err := store.Secret(ctx, rootdisk.BaseKeyName, rootdisk.NewBaseKey())
	if err != nil {
		return fmt.Errorf("the fleet's key for read-only base exports: %w", err)
	}
	mc, err := multicastConfig(c, serverIP)
	if err != nil {
		return err
	}
	dl, err := diskless.New(diskless.Config{Data: c.Data, Listen: c.NBD.Listen, ServerIP: serverIP, Agent: c.NBD.Agent,
		NICDrivers: c.NBD.NICDrivers,
		Images:     store, Leases: leases, BaseKey: baseKey, Multicast: mc, Logger: log})
	if err != nil {
		return err
	}
	defer dl.Close() // after the NBD server has stopped
	inv, err := inventorysvc.New(ctx, inventorysvc.Config{Store: store, Spec: c.Store, File: c, Discover: true,
		Reloaded: dl.PrepareKernels, Logger: log})
	if err != nil {
		return err
	}
	view := inv.View()

	httpLn, err := net.Listen("tcp", c.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w (is the port taken? set http.listen)", c.HTTP.Listen, err)
	}
	defer httpLn.Close() // for the error returns before it is served
	baseURL := "http://" + net.JoinHostPort(serverIP.String(), portOf(httpLn.Addr()))
	dl.SetBlocksURL(baseURL + diskless.OverlayBlocksPath)
	dl.SetOrderURL(baseURL + diskless.ReadOrderPath)
	name, err := serverName(c)
	if err != nil {
		return err
	}
	// The fleet as this server sees it, read every few seconds, for
	// whatever must know the other servers without a store read per request.
	fleetView := membership.NewView(membership.ViewConfig{Store: store, Self: name, Logger: log})
	imgs, peers, err := newImages(ctx, store, name, dl, c.NBD.MergeDepth, c.DefaultProfile, log)
	if err != nil {
		return err
	}

	rec, history := newHistory(c, store, name, log)
	if err := rec.Register(dl.Collectors()...); err != nil {
		return err
	}
	taps := telemetryTaps(c, rec, log)
	ids, err := newIdentity(ctx, c, store, view, log)
	if err != nil {
		return err
	}
	pw := newPower(c, rec, log)
	sched, err := newSchedules(c, store, pw, rec, name, log)
	if err != nil {
		return err
	}
	apiHandler, err := newAPI(c, store, inv.Changed, imgs, dl, migrations{view, dl}, history, ids, pw, sched, log)
	if err != nil {
		return err
	}
	// Scripts name the least-loaded live server holding what the machine
	// boots, for its files and its NBD root, and the others as fallbacks.
	holdings := membership.NewHoldings(store, 0, log)
	spread := membership.NewSpread(membership.SpreadConfig{View: fleetView, SelfBaseURL: baseURL, Holders: holdings.Holders})
	hc := httpboot.Config{
		Files: roots, Fleet: view, Boots: inv.BootClock(taps.boots),
		Transfers: taps.transfers, Milestones: taps.milestones, RootIO: taps.rootIO, Roots: diskless.WithFailover(dl, spread.Root, name, log), Kernels: dl.Kernels(),
		BaseURL: baseURL, ServerIP: serverIP.String(), Logger: log, Mirrors: spread, NextBoots: store,
		IdentityURL: baseURL + identitysvc.Path, TFTM: c.TFTP.Multicast != "" && c.TFTP.Listen != "off",
		DiskARM64: httpboot.DiskChain{Shim: c.SecureBoot.ShimARM64, Grub: c.SecureBoot.GrubARM64Disk},
	}
	hc.UKIs = newUKIs(c, log)
	tfs := tftpFS(c, roots, hc)
	mt, err := newMTFTP(c, mc, tfs, log)
	if err != nil {
		return err
	}
	if mt != nil {
		hc.MTFTP, hc.Groups = mt, httpboot.NewGroupHealth()
		if err := rec.Register(mtftpCollectors(mt)...); err != nil {
			return err
		}
	}
	boot := withIdentity(withPeers(httpboot.New(hc), peers, dl.OverlayBlocksHandler(), dl.ReadOrderHandler()), ids, dl.Disks())
	front := frontHandler(rec, apiHandler, boot)
	plain, mgmt, err := splitManagement(c, serverIP, front, boot, rec.Handler(), log)
	if err != nil {
		return err
	}
	var runs []func(context.Context) error // the servers, each until ctx ends or it fails
	runs = append(runs,
		inv.Run,     // discovered machines, view reloads
		imgs.Run,    // the fleet's images: fetch new ones, delete removed ones
		history.Run, // ended boots into the inventory, retention
		sched.Run,   // power schedules
		func(ctx context.Context) error { return serveHTTP(ctx, httpLn, plain, log) },
		func(ctx context.Context) error { return dl.Serve(ctx, taps.nbd) })
	runs = append(runs, mgmt...) // the HTTPS listener, with http.tls
	if mt != nil {
		runs = append(runs, mt.Run)
	}
	tftpActive := func() int { return 0 }
	if c.TFTP.Listen != "off" {
		srv := tftp.NewServer(tftp.Config{
			FS:                 tfs,
			Logger:             log,
			MaxWindow:          c.TFTP.MaxWindow,
			AllowFragmentation: c.TFTP.AllowFragmentation,
			DisableGSO:         c.TFTP.DisableGSO,
			MaxTransfers:       c.TFTP.MaxTransfers,
			MaxPerClient:       c.TFTP.MaxPerClient,
			MulticastGroups:    mcastGroups(c.TFTP.Multicast),
			OnTransfer:         taps.tftp,
		})
		tftpActive = srv.Active
		runs = append(runs, func(ctx context.Context) error { return srv.ListenAndServe(ctx, c.TFTP.Listen) })
		if c.DHCP6.Mode != "off" {
			conn6, err := listenTFTP6(ctx, c.TFTP.Listen)
			if err != nil {
				return err
			}
			runs = append(runs, func(ctx context.Context) error { return srv.Serve(ctx, conn6) })
		}
	}
	var dhcpScopes []string // registered beside the addresses, so DHCP servers on one LAN find each other
	if c.DHCP.Mode != "off" {
		scope, balance := dhcpPeers(c, serverIP, fleetView, log)
		d, err := newDHCP(c, serverIP, baseURL, view, leases, inv.Observer(taps.dhcp), taps.dhcpReply, taps.noBoot, balance, log)
		if err != nil {
			return err
		}
		dhcpScopes = append(dhcpScopes, scope)
		runs = append(runs, d.Run, balance.Run)
	}
	if c.DHCP6.Mode != "off" {
		ip6, ifc, err := serverIP6(c, serverIP)
		if err != nil {
			return err
		}
		var peers6 dhcp6.Peers
		if scope6, balance6 := dhcp6Peers(c, fleetView, log); balance6 != nil {
			dhcpScopes, peers6 = append(dhcpScopes, scope6), balance6
			runs = append(runs, balance6.Run)
		}
		d6, err := newDHCP6(c, ip6, ifc, portOf(httpLn.Addr()), view, inventorysvc.NewLeases6(store), inv.Observer(taps.dhcp), taps.noBoot, peers6, log)
		if err != nil {
			return err
		}
		runs = append(runs, d6.Run)
	}
	if c.IPv6RA == "auto" && (c.DHCP.Mode != "off" || c.DHCP6.Mode == "full") {
		ra, err := ndp.New(ndp.Config{Interface: c.Interface, Managed: managedPrefix(c), Logger: log})
		if err != nil {
			return err
		}
		runs = append(runs, ra.Run) // never fails: warns and returns if IPv6 is missing
	}
	reg, err := fleetRegistry(name, c.Data, store, serverIP, baseURL, dhcpScopes, tftpActive, dl, rec, log)
	if err != nil {
		return err
	}
	if err := reg.Register(ctx); err != nil {
		return err // another live server has this name: serve nothing
	}
	runs = append(runs, reg.Run, fleetView.Run, holdings.Run) // this server in the servers table, until it stops; the others
	g, gctx := errgroup.WithContext(ctx)
	for _, run := range runs {
		g.Go(func() error { return run(gctx) })
	}
	log.Info("bootfleet started", "server_ip", serverIP.String(), "http", baseURL,
		"tftp", c.TFTP.Listen, "nbd", c.NBD.Listen, "dhcp", c.DHCP.Mode, "interface", c.Interface,
		"profiles", len(c.Profiles), "machines", len(c.Machines))
	err = g.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopping", "err", err)
		return err
	}
	log.Info("bootfleet stopped")
	return nil
}

// resolveServerIP is server_ip if set, else the interface's address.
func resolveServerIP(c *config.Config) (net.IP, error) {
	if c.ServerIP != "" {
		ip := net.ParseIP(c.ServerIP)
		if ip4 := ip.To4(); ip4 != nil {
			return ip4, nil
		}
		return ip, nil
	}
	if c.Interface == "" {
		return nil, errors.New("server_ip: required when no interface is set; clients need an address for boot URLs")
	}
	a, err := lookupInterface(c.Interface)
	if err != nil {
		return nil, err
	}
	return a.IP, nil
}

func servedRoots(c *config.Config) (*safefs.Roots, error) {
	dirs := []string{c.IPXE.Dir}
	if c.TFTP.Root != "" {
		dirs = append(dirs, c.TFTP.Root)
	}
	roots, err := safefs.New(dirs...)
	if err != nil {
		return nil, fmt.Errorf("served roots (ipxe.dir, tftp.root): %w", err)
	}
	// The admin named these binaries, so they are served even where Debian
	// makes them symlinks out of the iPXE dir (ipxe.efi -> /boot/ipxe.efi).
	for _, f := range []string{c.IPXE.EFIBinary, c.IPXE.BIOSBinary, c.IPXE.EFIARM64Binary} {
		if f == "" {
			continue
		}
		if err := roots.Pin(f, filepath.Join(c.IPXE.Dir, f)); err != nil {
			roots.Close()
			return nil, fmt.Errorf("ipxe: %s in %s: %w (install Debian's ipxe package, or set ipxe.dir / ipxe.efi_binary / ipxe.bios_binary)", f, c.IPXE.Dir, err)
		}
	}
	// The signed chain, under the names shim and its firmware ask for.
	for _, p := range []struct{ key, name, path string }{
		{"secure_boot.shim", pxe.ShimFile, c.SecureBoot.Shim},
		{"secure_boot.grub", pxe.GrubFile, c.SecureBoot.Grub},
		{"secure_boot.shim_arm64", pxe.ShimARM64File, c.SecureBoot.ShimARM64},
		{"secure_boot.grub_arm64", pxe.GrubARM64File, c.SecureBoot.GrubARM64},
	} {
		if p.path == "" {
			continue
		}
		if err := roots.Pin(p.name, p.path); err != nil {
			roots.Close()
			return nil, fmt.Errorf("%s: %w (fetch Debian's signed binaries as the README's Secure Boot section says, and point %s at the file)", p.key, err, p.key)
		}
	}
	// Packed into arm64 HTTP Boot disk images, never served on its own.
	if g := c.SecureBoot.GrubARM64Disk; g != "" {
		if st, err := os.Stat(g); err != nil || !st.Mode().IsRegular() {
			roots.Close()
			return nil, fmt.Errorf("secure_boot.grub_arm64_disk: %s is not a readable file (scripts/arm64.sh fetches Debian's grubaa64.efi.signed)", g)
		}
	}
	return roots, nil
}

func tftpFS(c *config.Config, roots *safefs.Roots, hc httpboot.Config) tftp.FileSystem {
	fs := tftp.RootsFS(roots)
	if c.TFTP.CacheMB > 0 {
		fs = tftp.NewCache(fs, int64(c.TFTP.CacheMB)<<20)
	}
	if c.SecureBoot.Grub == "" && c.SecureBoot.GrubARM64 == "" && c.TFTP.Multicast == "" && !c.Multicast.MTFTPOn() {
		return fs
	}
	// Debian's signed grub has no http: after PXE it fetches everything,
	// its configs and the kernel, over TFTP. tftm:// and mtftp:// URLs
	// name the same profiles/ and images/ paths, and iPXE falls back from
	// mtftp:// to plain TFTP of its path.
	return httpboot.GrubTFTP(hc, fs)
}

// mcastGroups is tftp.multicast as a prefix; zero (off) when empty.
// Config validation has checked it.
func mcastGroups(s string) netip.Prefix {
	p, _ := netip.ParsePrefix(s)
	return p
}

// hostName is a machine's name in the fleet view, which DHCP hands out.
func hostName(view *machineview.View) func(net.HardwareAddr) string {
	return func(mac net.HardwareAddr) string { m, _ := view.Machine(mac); return m.Name }
}

func newDHCP(c *config.Config, serverIP net.IP, baseURL string, view *machineview.View, leases dhcp.LeaseStore, obs dhcp.Observer,
	onReply func(dhcp.Reply), noBoot func(net.HardwareAddr, string), peers dhcp.Peers, log *slog.Logger) (*dhcp.Server, error) {
	dc := dhcp.Config{
		Mode:       dhcp.ModeFull,
		Interface:  c.Interface,
		ServerIP:   serverIP,
		LeaseTime:  time.Duration(c.DHCP.Lease),
		LeaseStore: leases,
		HoldFile:   filepath.Join(c.Data, "dhcp-declined.json"),
		Plan: pxe.PlanConfig{
			BIOSFile:        c.IPXE.BIOSBinary,
			EFIx64File:      c.IPXE.EFIBinary,
			EFIARM64File:    c.IPXE.EFIARM64Binary,
			HTTPBase:        baseURL,
			Signed:          signed(view),
			SignedARM64:     c.SecureBoot.ShimARM64 != "",
			SignedARM64Disk: c.SecureBoot.GrubARM64Disk != "",
			Boots:           boots(view, noBoot),
		},
		Machines: view,
		HostName: hostName(view),
		Observer: obs,
		OnReply:  onReply,
		Peers:    peers,
		Logger:   log,
	}
	if c.DHCP.Mode == "proxy" {
		dc.Mode = dhcp.ModeProxy
	} else {
		dc.RangeStart, dc.RangeEnd, _ = c.DHCP.ParseRange()
		dc.Reserve = c.DHCP.Reserve
		if c.DHCP.Router != "" {
			dc.Router = net.ParseIP(c.DHCP.Router).To4()
		}
		for _, d := range c.DHCP.DNS {
			dc.DNS = append(dc.DNS, net.ParseIP(d).To4())
		}
	}
	return dhcp.New(dc)
}

func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(limitConns(ln, httpMaxConns, httpMaxConnsPerClient, log)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

// signed is pxe.PlanConfig.Signed: the machine's profile loads grub.
func signed(view *machineview.View) func(net.HardwareAddr) bool {
	return func(mac net.HardwareAddr) bool {
		t, ok := view.Resolve(mac)
		return ok && t.Spec.Loader == inventory.LoaderGrub
	}
}

// boots is pxe.PlanConfig.Boots: the machine's profile has a kernel for
// cpu, or takes it from its root image (served to x86_64 only). A machine
// with no profile is left to the script, which says so. A refusal goes to
// noBoot, so the machine's boot record says why it got no boot file.
func boots(view *machineview.View, noBoot func(net.HardwareAddr, string)) func(net.HardwareAddr, string) bool {
	return func(mac net.HardwareAddr, cpu string) bool {
		t, ok := view.Resolve(mac)
		if !ok {
			return true
		}
		if t.Spec.Root.Kernel == inventory.RootKernelImage {
			ok = cpu == inventory.ArchX86_64
		} else {
			_, ok = t.Spec.Files(cpu)
		}
		if !ok && noBoot != nil {
			noBoot(mac, fmt.Sprintf("no boot file: the machine is %s and profile %s has no %s kernel; add one (arm64: {kernel: ...}) or give the machine a profile that has one", cpu, t.Profile, cpu))
		}
		return ok
	}
}
