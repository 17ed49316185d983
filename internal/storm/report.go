package storm

import "github.com/bootfleet/bootfleet/internal/rootproxy"

// Report is the outcome of a run, and the form `bootfleet storm -o json`
// prints. Times are seconds as floating point; starts are seconds since
// the run began, so machines can be laid on one time axis.
type Report struct {
	Interface string   `json:"interface"`
	Firmware  Firmware `json:"firmware"`
	Clients   int      `json:"clients"`
	// RampSeconds is the time over which power-ons were spread.
	RampSeconds float64   `json:"ramp_seconds"`
	Machines    []Machine `json:"machines"`
	Summary     Summary   `json:"summary"`
}

// Machine is one emulated machine's boot.
type Machine struct {
	MAC string `json:"mac"`
	IP  string `json:"ip,omitempty"` // the leased address; empty when DHCP failed
	// Result is "ok", or "PHASE: what it got", e.g. "tftp: server sent
	// ERROR 1 file not found for bootx64.efi after 1 try".
	Result string `json:"result"`
	// PowerOn is when the machine started, seconds since the run began.
	PowerOn float64 `json:"power_on"`
	// Boot is power-on to the DoneURL answered (or to the failure).
	Boot   float64 `json:"boot"`
	Phases Phases  `json:"phases"`
	// Root is what the agent's root proxy did, when the command line
	// turned it on (a multicast group): bytes by multicast and unicast,
	// cache hits and misses, fallbacks.
	Root *rootproxy.Stats `json:"root,omitempty"`
	// Images is how each image the script loads came, kernel first.
	Images []ImageFetch `json:"images,omitempty"`
}

// Phases holds the phases a machine went through; a phase it never
// reached is absent.
type Phases struct {
	// DHCP covers every exchange: the firmware's and, after TFTP, iPXE's.
	// Its duration is their sum, and its start the first one's.
	DHCP *Phase `json:"dhcp,omitempty"`
	TFTP *Phase `json:"tftp,omitempty"` // the NBP (and EDK II's size probe)
	HTTP *Phase `json:"http,omitempty"` // the iPXE script and every file it names
	NBD  *Phase `json:"nbd,omitempty"`  // the read trace's replay
	Done *Phase `json:"done,omitempty"` // the GET of the DoneURL
}

// Phase is the time and bytes of one phase.
type Phase struct {
	Start    float64 `json:"start"`    // seconds since the run began
	Duration float64 `json:"duration"` // seconds
	Bytes    int64   `json:"bytes"`    // payload bytes received
	// Tries counts requests sent including retransmissions (DHCP
	// DISCOVER/REQUEST, TFTP RRQ); 0 where it does not apply.
	Tries int `json:"tries,omitempty"`
	// Retransmits counts TFTP ACKs sent again after a timeout.
	Retransmits int `json:"retransmits,omitempty"`
}

// Summary aggregates the machines.
type Summary struct {
	Booted  int `json:"booted"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"` // interrupted before finishing
	// WallSeconds is the first power-on to the last machine's end.
	WallSeconds float64 `json:"wall_seconds"`
	// Bytes is every phase's payload bytes, all machines.
	Bytes int64 `json:"bytes"`
	// LinkBitsPerSecond is the interface's speed; 0 when unknown.
	LinkBitsPerSecond int64 `json:"link_bits_per_second"`
	// Utilisation is Bytes*8 / WallSeconds / LinkBitsPerSecond; 0 when
	// the speed is unknown.
	Utilisation float64 `json:"utilisation"`
	// Phases has the per-phase distribution, by phase name, plus "boot"
	// for power-on to done.
	Phases map[string]Stats `json:"phases"`
	// Failures counts failed machines by result.
	Failures map[string]int `json:"failures,omitempty"`
	// Root sums the root proxies' counters; nil when no machine ran one.
	Root *RootSummary `json:"root,omitempty"`
	// Images sums how the machines got their images; nil when none
	// fetched any.
	Images *ImageSummary `json:"images,omitempty"`
}

// ImageSummary is how the machines got the images their scripts load,
// summed over machines and images.
type ImageSummary struct {
	Fetches        int   `json:"fetches"`
	MulticastBytes int64 `json:"multicast_bytes"` // from the MTFTP group: once on the link, not once per machine
	UnicastBytes   int64 `json:"unicast_bytes"`   // by HTTP, TFTP, or mtftp's own socket
	MTFTP          int   `json:"mtftp"`           // images the group delivered
	// MTFTPFellBack counts mtftp:// fetches that heard nothing and took
	// plain TFTP, iPXE's own fallback.
	MTFTPFellBack int `json:"mtftp_fell_back"`
	// URLFallbacks counts script URLs that failed before one worked
	// (kernel A || kernel B).
	URLFallbacks int `json:"url_fallbacks"`
}

func (s *ImageSummary) add(r ImageFetch) {
	s.Fetches++
	s.MulticastBytes += r.MulticastBytes
	s.UnicastBytes += r.Bytes - r.MulticastBytes
	if r.Via == "mtftp" {
		s.MTFTP++
	}
	if r.MTFTP != nil && r.MTFTP.FellBack {
		s.MTFTPFellBack++
	}
	s.URLFallbacks += r.Fallbacks
}

// RootSummary is what the machines' root proxies did, summed.
type RootSummary struct {
	Machines       int            `json:"machines"`
	MulticastBytes uint64         `json:"multicast_bytes"` // received from the group, all machines
	UnicastBytes   uint64         `json:"unicast_bytes"`   // read from the servers, all machines
	HitBytes       uint64         `json:"hit_bytes"`
	MissBytes      uint64         `json:"miss_bytes"`
	Fallbacks      uint64         `json:"fallbacks"`
	Lost           uint64         `json:"lost"`
	Repairs        uint64         `json:"repairs"`
	Overflow       uint64         `json:"overflow"`     // of Lost, dropped by the machine's (or the Hub's) full socket
	AheadChunks    uint64         `json:"ahead_chunks"` // chunks asked for as read-ahead
	AheadUsed      uint64         `json:"ahead_used"`   // of those, chunks the machine read later
	Multicast      map[string]int `json:"multicast"`    // machines by the group's state at the end: on, silent, lossy, off
}

func (r *RootSummary) add(st *rootproxy.Stats) {
	r.Machines++
	r.MulticastBytes += st.MulticastBytes
	r.UnicastBytes += st.UnicastBytes
	r.HitBytes += st.HitBytes
	r.MissBytes += st.MissBytes
	r.Fallbacks += st.Fallbacks
	r.Lost += st.Lost
	r.Repairs += st.Repairs
	r.Overflow += st.Overflow
	r.AheadChunks += st.AheadChunks
	r.AheadUsed += st.AheadUsed
	if r.Multicast == nil {
		r.Multicast = map[string]int{}
	}
	r.Multicast[st.Multicast]++
}

// Stats is a distribution of durations, in seconds.
type Stats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Bytes int64   `json:"bytes"`
}

// PhaseNames lists the phases in boot order, as they appear in Phases.
var PhaseNames = []string{"dhcp", "tftp", "http", "nbd", "done"}

// Get returns the phase called name (see PhaseNames), or nil.
func (p *Phases) Get(name string) *Phase {
	switch name {
	case "dhcp":
		return p.DHCP
	case "tftp":
		return p.TFTP
	case "http":
		return p.HTTP
	case "nbd":
		return p.NBD
	case "done":
		return p.Done
	}
	return nil
}
