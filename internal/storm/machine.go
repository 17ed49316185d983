package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/agent"
	"github.com/bootfleet/bootfleet/internal/rootarg"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// addrManager puts a machine's leased address on the interface and takes
// it off again.
type addrManager interface {
	add(netip.Prefix) error
	remove(netip.Prefix) error
}

// machine is one emulated machine's boot.
type machine struct {
	cfg   *Config
	mac   net.HardwareAddr
	dhcp  dhcpTransport
	addrs addrManager
	t0    time.Time // the run's start, the zero of every Phase.Start
	rep   *Machine
	// enter is called with each phase's name as the machine reaches it,
	// and moved with the bytes of each phase as it ends.
	enter func(phase string)
	moved func(bytes int64)
}

// phaseError is a failure and the phase it happened in.
type phaseError struct {
	phase string
	err   error
}

func (e *phaseError) Error() string { return e.phase + ": " + e.err.Error() }

// maxScriptBytes bounds an iPXE script held in memory.
const maxScriptBytes = 1 << 20

// maxChains bounds chain to another script, as a loop of chains would
// otherwise never end.
const maxChains = 4

// boot runs the machine from power-on to its DoneURL and records the
// outcome in m.rep.
func (m *machine) boot(ctx context.Context) {
	start := time.Now()
	m.rep.MAC = m.mac.String()
	m.rep.PowerOn = start.Sub(m.t0).Seconds()
	err := m.phases(ctx)
	m.rep.Boot = time.Since(start).Seconds()
	switch pe := (*phaseError)(nil); {
	case err == nil:
		m.rep.Result = "ok"
	case errors.As(err, &pe) && errors.Is(pe.err, context.DeadlineExceeded):
		m.rep.Result = fmt.Sprintf("%s: timed out, %v after power-on", pe.phase, m.cfg.Timeout)
	case errors.As(err, &pe) && errors.Is(pe.err, context.Canceled):
		m.rep.Result = pe.phase + ": interrupted"
	default:
		m.rep.Result = err.Error()
	}
}

func (m *machine) phases(ctx context.Context) error {
	ph := &m.rep.Phases
	fw := m.cfg.Firmware
	l, err := m.lease(ctx, fw == FirmwareIPXE)
	if err != nil {
		return err
	}
	m.rep.IP = l.addr.Addr().String()
	if err := m.addrs.add(l.addr); err != nil {
		return &phaseError{"dhcp", err}
	}
	addr := l.addr
	defer func() { m.addrs.remove(addr) }()

	if fw != FirmwareIPXE {
		if strings.Contains(l.bootFile, "://") {
			return &phaseError{"dhcp", fmt.Errorf("boot file %q is a URL: UEFI HTTP boot is not emulated; boot uefi or bios over TFTP", l.bootFile)}
		}
		m.enter("tftp")
		p := m.begin(&ph.TFTP)
		st, err := tftp.Get(ctx, l.addr.Addr(), netip.AddrPortFrom(l.server, 69), l.bootFile, io.Discard, m.cfg.TFTP)
		m.end(p, st.Bytes)
		p.Tries, p.Retransmits = st.Tries, st.Retransmits
		if err != nil {
			return &phaseError{"tftp", err}
		}
		if l, err = m.lease(ctx, true); err != nil {
			return err
		}
		if l.addr != addr { // iPXE got another address: move to it
			if err := m.addrs.add(l.addr); err != nil {
				return &phaseError{"dhcp", err}
			}
			m.addrs.remove(addr)
			addr = l.addr
			m.rep.IP = l.addr.Addr().String()
		}
	}

	m.enter("http")
	f := newFetcher(l.addr.Addr())
	defer f.close()
	p := m.begin(&ph.HTTP)
	kernel, n, err := m.fetchBoot(ctx, f, l)
	m.end(p, n)
	if err != nil {
		return &phaseError{"http", err}
	}

	root, err := rootarg.FromCmdline(kernel.Args)
	var ao agent.Options
	if err == nil {
		ao, err = agent.ParseCmdline(kernel.Args)
	}
	switch {
	case errors.Is(err, rootarg.ErrNoRoot):
	case err != nil:
		return &phaseError{"nbd", fmt.Errorf("kernel command line: %w", err)}
	case m.cfg.Trace == nil || len(m.cfg.Trace.Reads) == 0:
		return &phaseError{"nbd", errors.New("the command line names an NBD root but no trace was given")}
	default:
		m.enter("nbd")
		p := m.begin(&ph.NBD)
		var n int64
		if ao.Proxy {
			pr := proxyRoot{local: l.addr.Addr(), http: f.client, hubs: m.cfg.hubs, ram: m.cfg.RAM, depth: m.cfg.NBDDepth, log: m.cfg.Log}
			n, m.rep.Root, err = pr.replay(ctx, ao, m.cfg.Trace, m.moved)
		} else {
			n, err = nbdReplay(ctx, l.addr.Addr(), root, m.cfg.Trace, m.cfg.NBDDepth, m.moved)
		}
		m.end(p, 0) // moved has counted the bytes as they came
		p.Bytes = n
		if err != nil {
			return &phaseError{"nbd", fmt.Errorf("%s: %w", root, err)}
		}
		if ao.Milestones != "" && m.rep.Root != nil {
			// The agent reports its root proxy's counters (its first report
			// comes 5 s into a real boot, which the replay outruns); the
			// server learns from them whether the network drops the group.
			if _, _, err := f.get(ctx, ao.Milestones+"/"+agent.RootIOMilestone+"?"+agent.RootIOQuery(*m.rep.Root), 0); err != nil {
				return &phaseError{"nbd", fmt.Errorf("root-io report: %w", err)}
			}
		}
	}

	done := cmdlineValue(kernel.Args, m.cfg.DoneParam)
	if done == "" {
		return &phaseError{"done", fmt.Errorf("kernel command line has no %s=URL: %q", m.cfg.DoneParam, kernel.Args)}
	}
	m.enter("done")
	p = m.begin(&ph.Done)
	_, n, err = f.get(ctx, done, 0)
	m.end(p, n)
	if err != nil {
		return &phaseError{"done", err}
	}
	return nil
}

// lease runs one DORA, adding it to the dhcp phase.
func (m *machine) lease(ctx context.Context, asIPXE bool) (lease, error) {
	m.enter("dhcp")
	ph := &m.rep.Phases
	p := ph.DHCP
	if p == nil {
		p = m.begin(&ph.DHCP)
	}
	t := time.Now()
	o := m.cfg.DHCP
	if asIPXE {
		o = m.cfg.ipxeDHCP
	}
	l, err := dora(ctx, m.dhcp, m.mac, m.cfg.Firmware, asIPXE, o)
	p.Duration += time.Since(t).Seconds()
	p.Tries += l.tries
	p.Bytes += l.bytes
	m.moved(l.bytes)
	if err != nil {
		who := "firmware"
		if asIPXE {
			who = "iPXE"
		}
		return l, &phaseError{"dhcp", fmt.Errorf("%s: %w", who, err)}
	}
	return l, nil
}

// fetchBoot GETs the iPXE script named by the lease, follows chains to
// further scripts, and fetches every image the script loads, each from
// its fallbacks while it fails. It returns
// the kernel (with its command line) and the bytes received.
func (m *machine) fetchBoot(ctx context.Context, f *fetcher, l lease) (Image, int64, error) {
	if !strings.HasPrefix(l.bootFile, "http://") && !strings.HasPrefix(l.bootFile, "https://") {
		return Image{}, 0, fmt.Errorf("iPXE got boot file %q, want an http:// script URL", l.bootFile)
	}
	vars := m.ipxeVars(l)
	var total int64
	next := l.bootFile
	for range maxChains + 1 {
		body, n, err := f.get(ctx, next, maxScriptBytes)
		total += n
		if err != nil {
			return Image{}, total, err
		}
		if !strings.HasPrefix(string(body), "#!ipxe") && !strings.HasPrefix(string(body), "#!gpxe") {
			return Image{}, total, fmt.Errorf("%s is not an iPXE script (%d bytes): chainloading binaries is not emulated", next, n)
		}
		base, _ := url.Parse(next)
		s, err := ParseScript(string(body), base, vars)
		if err != nil {
			return Image{}, total, fmt.Errorf("%s: %w", next, err)
		}
		if s.Chain != "" {
			next = s.Chain
			continue
		}
		var kernel Image
		for i, img := range append([]Image{s.Kernel}, s.Initrds...) {
			got, r, err := m.fetchImage(ctx, f, l.addr.Addr(), img)
			total += r.Bytes
			m.rep.Images = append(m.rep.Images, r)
			if err != nil {
				return Image{}, total, err
			}
			if i == 0 {
				kernel = got
			}
		}
		return kernel, total, nil
	}
	return Image{}, total, fmt.Errorf("more than %d chained scripts", maxChains)
}

// ipxeVars are the iPXE settings a script may expand.
func (m *machine) ipxeVars(l lease) map[string]string {
	arch, platform := "i386", "pcbios"
	if m.cfg.Firmware == FirmwareUEFI {
		arch, platform = "x86_64", "efi"
	}
	mask := net.CIDRMask(l.addr.Bits(), 32)
	v := map[string]string{
		"mac": m.mac.String(), "ip": l.addr.Addr().String(), "netmask": net.IP(mask).String(),
		"next-server": l.server.String(), "filename": l.bootFile,
		"buildarch": arch, "platform": platform, "manufacturer": "bootfleet storm",
		"uuid": fmt.Sprintf("%x", machineUUID(m.mac)[1:]),
	}
	for k, val := range map[string]string{"mac": v["mac"], "ip": v["ip"], "netmask": v["netmask"]} {
		v["net0/"+k] = val
	}
	return v
}

// begin starts a phase now.
func (m *machine) begin(slot **Phase) *Phase {
	p := &Phase{Start: time.Since(m.t0).Seconds()}
	*slot = p
	return p
}

// end closes a phase begun with begin.
func (m *machine) end(p *Phase, bytes int64) {
	p.Duration = time.Since(m.t0).Seconds() - p.Start
	p.Bytes += bytes
	m.moved(bytes)
}

// cmdlineValue returns the value of the last key=value word.
func cmdlineValue(cmdline, key string) string {
	v := ""
	for _, w := range strings.Fields(cmdline) {
		if k, val, ok := strings.Cut(w, "="); ok && k == key {
			v = val
		}
	}
	return v
}
