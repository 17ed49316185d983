package storm

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// Config is one storm. Zero fields get the defaults documented on them.
type Config struct {
	Interface string   // required: the network the machines boot from
	Clients   int      // how many machines, 1..65535
	Firmware  Firmware // uefi, bios or ipxe
	// Ramp spreads the power-ons evenly over this time, like a lab powered
	// on row by row. Default 0: all at once.
	Ramp time.Duration
	// Timeout bounds each machine from power-on to its DoneURL. Default 10 min.
	Timeout time.Duration
	// MACPrefix starts every machine's MAC; default DefaultMACPrefix.
	MACPrefix string
	// DHCP and TFTP are the firmware's timers and options; zero fields get
	// the firmware's defaults (DefaultDHCP, DefaultTFTP). DHCP applies to
	// the chainloaded iPXE's exchange too, except that an unset Timeout
	// is iPXE's own there.
	DHCP DHCPOptions
	TFTP tftp.ClientOptions
	// ipxeDHCP is DHCP as the chainloaded iPXE uses it.
	ipxeDHCP DHCPOptions
	// Trace is the NBD reads each machine with a diskless root replays.
	// Default: DefaultTrace, the committed trace of a Debian 12 boot.
	Trace *Trace
	// NBDDepth is how many reads are in flight at once. Default 8.
	NBDDepth int
	// RAM is each machine's emulated memory, which sizes the agent's read
	// cache of the root's base when the root proxy is on (10% of it by
	// default, as on a real machine). Default 2 GiB.
	RAM int64
	// hubs are the groups' sockets the machines' root proxies share,
	// joined on Interface.
	hubs *hubs
	// DoneParam is the kernel command line parameter holding the DoneURL.
	// Default "done", as in bootfleet's example profiles.
	DoneParam string
	// Log receives a line for each machine that fails; default: discard.
	Log *slog.Logger
	// Progress, if set, is called about every 200 ms with the machines'
	// states, and once more at the end.
	Progress func(Progress)
}

// Progress is a snapshot of a running storm.
type Progress struct {
	Clients int
	Phase   map[string]int // machines in each phase now ("wait": not powered on yet)
	OK      int
	Failed  int
	Bytes   int64 // received so far
	Elapsed time.Duration
	Done    bool // the last call: every machine has finished or was interrupted
}

// DefaultDHCP returns a firmware's DHCP timers.
func DefaultDHCP(fw Firmware) DHCPOptions {
	o := DHCPOptions{Timeout: 4 * time.Second, Tries: 4, OfferWait: 2 * time.Second}
	if fw == FirmwareIPXE {
		o.Timeout = time.Second
	}
	return o
}

// DefaultTFTP returns a firmware's TFTP options: OVMF asks windowsize 4
// and blksize 1468 and probes the size first; a BIOS PXE ROM is lockstep
// at 1432.
func DefaultTFTP(fw Firmware) tftp.ClientOptions {
	if fw == FirmwareUEFI {
		return tftp.ClientOptions{BlockSize: 1468, WindowSize: 4, SizeProbe: true, Timeout: 4 * time.Second, Tries: 6}
	}
	return tftp.ClientOptions{BlockSize: 1432, Timeout: 4 * time.Second, Tries: 6}
}

// DefaultRAM is an emulated machine's memory: a small lab PC's 2 GiB,
// whose 10% read cache (205 MiB) holds a Debian boot's working set.
const DefaultRAM = 2 << 30

//go:embed testdata/debian12.trace
var defaultTrace string

// DefaultTrace is the committed read trace of a stock Debian 12 boot
// (internal/storm/testdata/debian12.trace).
func DefaultTrace() *Trace {
	t, err := ParseTrace(strings.NewReader(defaultTrace))
	if err != nil {
		panic("storm: committed trace: " + err.Error())
	}
	return t
}

func (c *Config) setDefaults() error {
	if c.Interface == "" {
		return errors.New("no interface: set --interface to the network the machines boot from")
	}
	if c.Clients < 1 || c.Clients > 65535 {
		return fmt.Errorf("clients %d: want 1..65535", c.Clients)
	}
	if _, err := ParseFirmware(string(c.Firmware)); err != nil {
		return err
	}
	if c.Ramp < 0 {
		return fmt.Errorf("ramp %v: want 0 or more", c.Ramp)
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MACPrefix == "" {
		c.MACPrefix = DefaultMACPrefix
	}
	if _, err := MACFor(c.MACPrefix, c.Clients-1); err != nil {
		return err
	}
	d := DefaultDHCP(c.Firmware)
	c.ipxeDHCP = c.DHCP
	c.ipxeDHCP.Timeout = orDefault(c.DHCP.Timeout, DefaultDHCP(FirmwareIPXE).Timeout)
	c.DHCP.Timeout = orDefault(c.DHCP.Timeout, d.Timeout)
	c.DHCP.Tries = orDefault(c.DHCP.Tries, d.Tries)
	c.DHCP.OfferWait = orDefault(c.DHCP.OfferWait, d.OfferWait)
	c.ipxeDHCP.Tries, c.ipxeDHCP.OfferWait = c.DHCP.Tries, c.DHCP.OfferWait
	t := DefaultTFTP(c.Firmware)
	c.TFTP.Timeout = orDefault(c.TFTP.Timeout, t.Timeout)
	c.TFTP.Tries = orDefault(c.TFTP.Tries, t.Tries)
	if c.TFTP.BlockSize != 0 && (c.TFTP.BlockSize < 8 || c.TFTP.BlockSize > 65464) {
		return fmt.Errorf("tftp blksize %d: want 8..65464 (RFC 2348), or 0 to send none", c.TFTP.BlockSize)
	}
	if c.TFTP.WindowSize < 0 || c.TFTP.WindowSize > 65535 {
		return fmt.Errorf("tftp windowsize %d: want 1..65535 (RFC 7440), or 0 to send none", c.TFTP.WindowSize)
	}
	if c.Trace == nil {
		c.Trace = DefaultTrace()
	}
	c.NBDDepth = orDefault(c.NBDDepth, 8)
	c.RAM = orDefault(c.RAM, DefaultRAM)
	if c.RAM < 64<<20 {
		return fmt.Errorf("ram %d bytes: want at least 64 MiB", c.RAM)
	}
	if c.DoneParam == "" {
		c.DoneParam = "done"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// Run boots cfg.Clients machines and reports on them. It returns when
// every machine has finished, failed, or been interrupted by ctx; the
// report then holds what each got so far. Every address a machine added
// is removed before Run returns, interrupted or not.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	cfg.hubs = &hubs{ifi: ifi}
	defer cfg.hubs.close()
	conn, err := openDHCPConn(cfg.Interface)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	addrs, err := openAddrs(cfg.Interface)
	if err != nil {
		return nil, err
	}
	rep, runErr := run(ctx, &cfg, conn, addrs)
	if err := addrs.Close(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	rep.Summary = summarize(rep.Machines, linkSpeed(cfg.Interface))
	return rep, runErr
}

// run powers the machines on along the ramp and waits for them.
func run(ctx context.Context, cfg *Config, tr dhcpTransport, addrs addrManager) (*Report, error) {
	rep := &Report{Interface: cfg.Interface, Firmware: cfg.Firmware, Clients: cfg.Clients,
		RampSeconds: cfg.Ramp.Seconds(), Machines: make([]Machine, cfg.Clients)}
	t0 := time.Now()
	tr0 := newTracker(cfg.Clients, t0)
	stopProgress := tr0.report(cfg.Progress)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		mac, _ := MACFor(cfg.MACPrefix, i)
		rep.Machines[i] = Machine{MAC: mac.String(), Result: "dhcp: not powered on"}
		at := time.Duration(0)
		if cfg.Clients > 1 {
			at = cfg.Ramp * time.Duration(i) / time.Duration(cfg.Clients-1)
		}
		if !sleepUntil(ctx, t0.Add(at)) {
			rep.Machines[i].Result = "dhcp: interrupted before power-on"
			continue
		}
		m := &machine{cfg: cfg, mac: mac, dhcp: tr, addrs: addrs, t0: t0, rep: &rep.Machines[i],
			enter: func(phase string) { tr0.move(i, phase) }, moved: tr0.moved}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			m.boot(mctx)
			tr0.finish(i, m.rep)
			if m.rep.Result != "ok" {
				cfg.Log.Warn("storm machine failed", "mac", m.rep.MAC, "ip", m.rep.IP, "result", m.rep.Result)
			}
		}()
	}
	wg.Wait()
	stopProgress()
	return rep, ctx.Err()
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
