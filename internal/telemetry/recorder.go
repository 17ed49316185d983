package telemetry

import (
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// Config configures a Recorder. Zero values select the documented defaults.
type Config struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// PerMachine is how many recent boots are kept per machine. Default 16.
	PerMachine int
	// MaxBoots bounds the boots kept over all machines; the oldest go
	// first. Default 4096 (a few MB).
	MaxBoots int
	// StaleAfter is how long a boot stays open without boot complete;
	// after that it reads as failed and the next DHCPDISCOVER starts a new
	// one. Default 1h.
	StaleAfter time.Duration
	// LookupIP maps a client address to its MAC for TFTP transfers, which
	// carry only the address. It is consulted once per transfer, after the
	// transfer ended, when no HTTP request with ?mac= taught the recorder
	// the address already. Default: the kernel's neighbour table on Linux.
	LookupIP func(net.IP) net.HardwareAddr
	// Ended is the capacity of the queue of boots that ended (complete,
	// failed, or evicted from memory unfinished), which a History drains
	// into the inventory. Default 0: no queue, boots live in memory only.
	// A full queue drops the record (counted in
	// bootfleet_boot_records_dropped_total) rather than wait.
	Ended int
	// Server names this server in its boot records and on every event it
	// served, and makes the Recorder a member of a fleet that shares one
	// store (fleet.go): an event of a machine with no open boot here
	// opens a partial record, and open boots that changed reach the store
	// once quiet for Quiet, so every server's reads can merge them. Boot
	// IDs then end in a hash of the name, so two servers never write one
	// ID. Default "": a lone server, whose boots start only at DHCP.
	Server string
	// Quiet is, with Server, how long an open boot that changed waits
	// for more events before it is stored; one that keeps changing is
	// stored at least every 6 Quiet. Default 5s.
	Quiet time.Duration
}

// Per-boot bounds, so a machine stuck in a DHCP or download loop cannot
// grow its record without end. The counters in /metrics still count all.
const (
	maxDHCPPerBoot      = 64
	maxTransfersPerBoot = 64
	maxMilestones       = 32
	maxPath             = 16
	maxIPs              = 1 << 16
)

// Stages order what a boot has reached. A DHCPDISCOVER from a stage below
// the one the open boot reached means the machine started over.
const (
	stageFirmware = 10 // PXE / UEFI firmware DHCP
	stageTFTP     = 15 // firmware downloads the network boot program
	stageIPXE     = 20 // iPXE DHCP
	stageScript   = 22 // iPXE fetched its script
	stageHTTP     = 25 // iPXE downloads kernel and initrd
	stageOS       = 30 // the OS's own DHCP client
)

// Recorder records boots. It is safe for concurrent use; every hook is
// O(1) under one mutex and does no I/O.
type Recorder struct {
	cfg Config
	m   *metrics

	mu    sync.Mutex
	byMAC map[string][]*boot // oldest first
	byID  map[string]*boot
	order []*boot // all kept boots, oldest first, from head
	head  int
	kept  int
	ips   map[string]string // client IP -> MAC, learned from ?mac= requests
	ended chan Boot         // see Config.Ended; nil without a queue
	idTag string            // "-" and a hash of Config.Server; "" outside a fleet
	dirty map[*boot]bool    // open boots changed since they were last queued, in a fleet
	// powered holds power commands whose boot has not started (power.go).
	powered map[string]PowerCause

	dropped atomic.Uint64 // ended boots the full queue turned away, for the History's log
}

type boot struct {
	Boot
	stage int
	gone  bool // evicted
	// In a fleet: the last change, and the first since the boot was last
	// queued for the store.
	touched, dirtySince time.Time
}

// New returns an empty Recorder.
func New(cfg Config) *Recorder {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PerMachine <= 0 {
		cfg.PerMachine = 16
	}
	if cfg.MaxBoots <= 0 {
		cfg.MaxBoots = 4096
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = time.Hour
	}
	if cfg.LookupIP == nil {
		cfg.LookupIP = neighbourMAC
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 5 * time.Second
	}
	r := &Recorder{cfg: cfg, m: newMetrics(), byMAC: map[string][]*boot{}, byID: map[string]*boot{}, ips: map[string]string{},
		dirty: map[*boot]bool{}, powered: map[string]PowerCause{}}
	if cfg.Server != "" {
		r.idTag = "-" + serverTag(cfg.Server)
	}
	if cfg.Ended > 0 {
		r.ended = make(chan Boot, cfg.Ended)
	}
	return r
}

func clientStage(c pxe.Client) int {
	switch {
	case !c.Boot():
		return stageOS
	case c.IPXE:
		return stageIPXE
	}
	return stageFirmware
}

// DHCPPacket records one valid DHCP request; it makes the Recorder a
// dhcp.Observer. A DHCPDISCOVER from network-boot firmware starts a new
// boot unless the machine's open boot has not got past this stage yet
// (firmware and iPXE both send DISCOVER within one boot). Other packets
// join the open boot; without one (an OS renewing its lease) they only
// count in /metrics.
func (r *Recorder) DHCPPacket(mac net.HardwareAddr, t dhcpv4.MessageType, c pxe.Client) {
	r.m.dhcp(t)
	now := r.cfg.Now().UTC()
	stage := clientStage(c)
	key := mac.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.open(key, now)
	if t == dhcpv4.MessageTypeDiscover && c.Boot() && (b == nil || b.stage > stage || b.Partial) {
		switch {
		case b != nil && b.Partial:
			r.closePartial(b)
		case b != nil:
			r.fail(b, "the machine started its network boot over before boot complete (reset, or the boot failed)", false)
		}
		b = r.start(key, now)
		r.m.bootsStarted.Inc()
	}
	if b == nil {
		return
	}
	r.touch(b, now)
	b.stage = max(b.stage, stage)
	if p := c.Path(); p != "" && len(b.Path) < maxPath && (len(b.Path) == 0 || b.Path[len(b.Path)-1] != p) {
		b.Path = append(b.Path, p)
	}
	if len(b.DHCP) < maxDHCPPerBoot {
		b.DHCP = append(b.DHCP, DHCPExchange{Time: now, Type: strings.TrimPrefix(t.String(), "DHCP"), Client: c.Firmware(),
			Server: r.cfg.Server})
	}
}

// open returns the machine's open boot, failing it first if it went stale.
// Call with mu held.
func (r *Recorder) open(key string, now time.Time) *boot {
	bs := r.byMAC[key]
	if len(bs) == 0 {
		return nil
	}
	b := bs[len(bs)-1]
	if b.State != StateBooting {
		return nil
	}
	if now.Sub(b.Start) > r.cfg.StaleAfter {
		r.fail(b, "no boot complete within "+r.cfg.StaleAfter.String(), false)
		return nil
	}
	return b
}

// fail ends b as failed. reported is a failure the client reported. In a
// fleet only those count in /metrics: a boot this server saw start over
// or go stale may have called its DoneURL on another server. Call with mu
// held.
func (r *Recorder) fail(b *boot, reason string, reported bool) {
	b.State, b.Reason = StateFailed, reason
	if reported || r.cfg.Server == "" {
		r.m.bootsFailed.Inc()
	}
	r.publish(b)
}

// start opens a new boot, evicting the oldest ones beyond the bounds.
// Call with mu held.
func (r *Recorder) start(key string, now time.Time) *boot {
	b := &boot{Boot: Boot{ID: bootIDOf(key, now) + r.idTag, MAC: key, Start: now, State: StateBooting, Server: r.cfg.Server,
		Power: r.takePower(key, now)}}
	bs := r.byMAC[key]
	if len(bs) >= r.cfg.PerMachine {
		r.evict(bs[0])
		bs = r.byMAC[key]
	}
	r.byMAC[key] = append(bs, b)
	r.byID[b.ID] = b
	r.order = append(r.order, b)
	r.kept++
	for r.kept > r.cfg.MaxBoots {
		old := r.order[r.head]
		r.order[r.head] = nil
		r.head++
		if !old.gone {
			r.evict(old)
		}
	}
	// Per-machine evictions leave dead entries anywhere in the queue.
	// Rebuild it once they outnumber the live ones, so it stays
	// O(MaxBoots) in memory at amortized O(1) per boot.
	if live := len(r.order) - r.head; live > 2*r.kept+64 {
		r.order = slices.DeleteFunc(slices.Delete(r.order, 0, r.head), func(x *boot) bool { return x.gone })
		r.head = 0
	}
	return b
}

func (r *Recorder) evict(b *boot) {
	if b.State == StateBooting {
		r.publish(b) // ended ones were published when they ended
	}
	b.gone = true
	delete(r.dirty, b)
	r.kept--
	delete(r.byID, b.ID)
	bs := slices.DeleteFunc(r.byMAC[b.MAC], func(x *boot) bool { return x == b })
	if len(bs) == 0 {
		delete(r.byMAC, b.MAC)
		return
	}
	r.byMAC[b.MAC] = bs
}

// addTransfer attaches t to mac's open boot. Call with mu held.
func (r *Recorder) addTransfer(mac string, t Transfer, stage int) bool {
	b := r.active(mac, t.End, t.Start)
	if b == nil {
		return false
	}
	r.touch(b, t.End)
	t.Server = r.cfg.Server
	b.stage = max(b.stage, stage)
	if len(b.Transfers) < maxTransfersPerBoot {
		b.Transfers = append(b.Transfers, t)
	}
	return true
}

// learnIP remembers which MAC uses ip. Call with mu held.
func (r *Recorder) learnIP(ip, mac string) {
	if ip == "" || mac == "" || r.ips[ip] == mac {
		return
	}
	if len(r.ips) >= maxIPs {
		clear(r.ips) // relearned from the next requests; never unbounded
	}
	r.ips[ip] = mac
}

// Milestone records a point the client reported. name is checked by the
// caller (httpboot allows [a-z0-9._-]).
func (r *Recorder) Milestone(mac net.HardwareAddr, name, remote string) {
	now := r.cfg.Now().UTC()
	key := mac.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learnIP(hostOf(remote), key)
	b := r.active(key, now, now)
	if b == nil || len(b.Milestones) >= maxMilestones {
		return
	}
	r.touch(b, now)
	if name == "ipxe-script" || name == httpboot.MilestoneGrubConfig {
		b.stage = max(b.stage, stageScript)
	}
	b.Milestones = append(b.Milestones, Milestone{Time: now, Name: name, Server: r.cfg.Server})
	if p := milestonePath[name]; p != "" && len(b.Path) < maxPath {
		b.Path = append(b.Path, p)
	}
	if reason, ok := milestoneFailure(name); ok {
		r.fail(b, reason, true)
	}
}

// milestoneFailure says whether the milestone name ends a boot as failed,
// and why.
func milestoneFailure(name string) (string, bool) {
	step, ok := strings.CutPrefix(name, "failed-")
	if !ok {
		return "", false
	}
	if reason := failedReason[name]; reason != "" {
		return reason, true
	}
	return "the client reported that " + step + " failed", true
}

// milestonePath names the stages of the signed chain in Boot.Path: grub
// reports them, as DHCP reports the firmware's.
var milestonePath = map[string]string{
	httpboot.MilestoneGrubConfig: "grub",
	grub.MilestoneSecureBootOn:   "Secure Boot on",
	grub.MilestoneSecureBootOff:  "Secure Boot off",
}

// failedReason says, for the failures grub reports, where the boot
// stopped and the likely cause. A milestone failed-STEP ends the boot as
// failed.
var failedReason = map[string]string{
	grub.MilestoneKernelFailed: "grub refused or could not load the kernel; under Secure Boot the kernel must be signed by a key shim trusts (Debian's are)",
	grub.MilestoneInitrdFailed: "grub could not load an initrd",
	grub.MilestoneBootFailed:   "grub could not start the kernel",
}

// Complete ends mac's open boot, the DoneURL's call, and returns how
// long it took since its first DHCP packet; it makes the Recorder an
// httpboot.BootClock. ok is false when this server saw no DHCP for the
// boot: none is open (a second call, a restart mid-boot), or in a fleet
// the boot's DHCP went to another server, whose part holds its start.
func (r *Recorder) Complete(mac net.HardwareAddr) (took time.Duration, ok bool) {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.active(mac.String(), now, now)
	if b == nil {
		return 0, false
	}
	b.State = StateComplete
	b.End = &now
	b.DoneServer = r.cfg.Server
	r.m.bootsCompleted.Inc()
	r.publish(b)
	if b.Partial { // it starts at this server's first event, mid-boot
		return 0, false
	}
	took = now.Sub(b.Start)
	r.m.bootDuration.Observe(took.Seconds())
	return took, true
}

// Filter selects boots. Zero fields match everything.
type Filter struct {
	MAC   net.HardwareAddr
	Since time.Time
	Limit int
}

// Boots returns copies of the kept boots that match f, newest first, with
// Summary and Phases filled in.
func (r *Recorder) Boots(f Filter) []Boot {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	var picked []*boot
	if f.MAC != nil {
		picked = slices.Clone(r.byMAC[f.MAC.String()])
	} else {
		for _, b := range r.order[r.head:] {
			if !b.gone {
				picked = append(picked, b)
			}
		}
	}
	out := make([]Boot, 0, len(picked))
	for i := len(picked) - 1; i >= 0; i-- {
		if b := picked[i]; !b.Start.Before(f.Since) {
			out = append(out, r.snapshot(b, now))
		}
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	r.mu.Unlock()
	for i := range out {
		out[i].derive()
	}
	return out
}

// Boot returns the boot with the given ID.
func (r *Recorder) Boot(id string) (Boot, bool) {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	b, ok := r.byID[id]
	var out Boot
	if ok {
		out = r.snapshot(b, now)
	}
	r.mu.Unlock()
	if ok {
		out.derive()
	}
	return out, ok
}

// snapshot copies b so the caller can read it without the lock. Call
// with mu held.
func (r *Recorder) snapshot(b *boot, now time.Time) Boot {
	out := b.Boot
	out.DHCP = slices.Clone(b.DHCP)
	out.Transfers = slices.Clone(b.Transfers)
	out.Milestones = slices.Clone(b.Milestones)
	out.Path = slices.Clone(b.Path)
	if out.Path == nil {
		out.Path = []string{}
	}
	if out.State == StateBooting && now.Sub(out.Start) > r.cfg.StaleAfter {
		out.State, out.Reason = StateFailed, "no boot complete within "+r.cfg.StaleAfter.String()
	}
	if out.DHCP == nil {
		out.DHCP = []DHCPExchange{}
	}
	if out.Transfers == nil {
		out.Transfers = []Transfer{}
	}
	if out.Milestones == nil {
		out.Milestones = []Milestone{}
	}
	return out
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// DHCPReply records a sent reply: its latency in /metrics, and what was
// offered (address, boot file) on the machine's open boot. It fits
// dhcp.Config.OnReply.
func (r *Recorder) DHCPReply(rep dhcp.Reply) {
	r.m.dhcpReply[rep.Request].Observe(rep.Took.Seconds())
	if rep.MAC == nil {
		return
	}
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.open(rep.MAC.String(), now)
	if b == nil || len(b.DHCP) >= maxDHCPPerBoot {
		return
	}
	r.touch(b, now)
	x := DHCPExchange{Time: now, Type: strings.TrimPrefix(rep.Type.String(), "DHCP"), BootFile: rep.BootFile,
		VendorClass: rep.VendorClass, Server: r.cfg.Server}
	if rep.Addr != nil && !rep.Addr.IsUnspecified() {
		x.Addr = rep.Addr.String()
	}
	b.DHCP = append(b.DHCP, x)
}
