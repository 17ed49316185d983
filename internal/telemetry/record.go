package telemetry

import (
	"encoding/hex"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Boot states.
const (
	StateBooting  = "booting"  // DHCP seen, DoneURL not yet called
	StateComplete = "complete" // the OS called its DoneURL
	StateFailed   = "failed"   // superseded by a new boot, or open longer than StaleAfter
)

// Boot is one machine's boot as the API and CLI see it. Times are UTC.
type Boot struct {
	ID     string     `json:"id"`
	MAC    string     `json:"mac"`
	Start  time.Time  `json:"start"`
	End    *time.Time `json:"end,omitempty"`
	State  string     `json:"state"`
	Reason string     `json:"reason,omitempty"` // why a boot failed
	// Path is the firmware path the boot took, one entry per stage in the
	// order the machine reached them: "PXEv4", "HTTPv4", "iPXE".
	Path       []string       `json:"path"`
	DHCP       []DHCPExchange `json:"dhcp"`
	Transfers  []Transfer     `json:"transfers"`
	Milestones []Milestone    `json:"milestones"`
	NBD        []NBDSession   `json:"nbd,omitempty"`
	// RootIO is how the diskless root arrived, as the agent last said.
	RootIO  *RootIO `json:"root_io,omitempty"`
	Summary Summary `json:"summary"`
	Phases  []Phase `json:"phases"`
	// Server is the server that recorded the boot; in a merged boot, the
	// one whose DHCP started it. Empty on a server outside a fleet.
	Server string `json:"server,omitempty"`
	// DoneServer is the server whose DoneURL the OS called.
	DoneServer string `json:"done_server,omitempty"`
	// Partial says no DHCPDISCOVER of this record started the boot: its
	// server only served files, NBD, milestones or the DoneURL of a boot
	// another server's DHCP started (or a DHCP server outside the fleet).
	Partial bool `json:"partial,omitempty"`
	// Servers and Parts are set on a boot merged from the records of
	// several servers: the servers' names, sorted, and the records' IDs,
	// oldest first (merge.go).
	Servers []string `json:"servers,omitempty"`
	Parts   []string `json:"parts,omitempty"`
	// Power is the power command this boot followed, when bootfleet
	// started it (power.go); nil for a boot someone else started.
	Power *PowerCause `json:"power,omitempty"`
}

// DHCPExchange is one DHCP packet the server handled for the machine.
type DHCPExchange struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`             // DISCOVER, REQUEST from the client; OFFER, ACK, NAK from us
	Client string    `json:"client,omitempty"` // on requests: the firmware, which decides the answer (uefi-x64, ipxe-bios, os)
	// On replies: what was offered.
	Addr        string `json:"addr,omitempty"`
	BootFile    string `json:"boot_file,omitempty"`
	VendorClass string `json:"vendor_class,omitempty"` // option 60 sent: HTTPClient to UEFI HTTP boot
	Server      string `json:"server,omitempty"`       // the server that heard or sent the packet
}

// Transfer is one file the machine downloaded.
type Transfer struct {
	Proto       string    `json:"proto"` // tftp or http
	Name        string    `json:"name"`
	Remote      string    `json:"remote"`
	Bytes       int64     `json:"bytes"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Seconds     float64   `json:"seconds"`
	MBps        float64   `json:"mbps"`                  // 1e6 bytes per second
	BlockSize   int       `json:"blksize,omitempty"`     // TFTP only
	WindowSize  int       `json:"windowsize,omitempty"`  // TFTP only
	Retransmits int       `json:"retransmits,omitempty"` // TFTP only
	Err         string    `json:"error,omitempty"`
	Server      string    `json:"server,omitempty"` // the server that sent the file
}

// Milestone is a point the client reported, e.g. "ipxe-script" when iPXE
// fetched its script, or a name the OS sent to /milestone/{mac}/{name}.
type Milestone struct {
	Time   time.Time `json:"time"`
	Name   string    `json:"name"`
	Server string    `json:"server,omitempty"` // the server the client reported it to
}

// Summary is the row `bootfleet boots` prints.
type Summary struct {
	// DHCPSeconds adds up the DHCP phases: for each client stage
	// (firmware, iPXE, OS), its first packet to its last.
	DHCPSeconds float64 `json:"dhcp_seconds"`
	// DownloadSeconds is the time during which at least one transfer ran.
	DownloadSeconds float64 `json:"download_seconds"`
	DownloadBytes   int64   `json:"download_bytes"`
	DownloadMBps    float64 `json:"download_mbps"`
	// TotalSeconds is first DHCP packet to DoneURL; 0 until complete.
	TotalSeconds float64 `json:"total_seconds"`
}

// Phase is one bar of the timeline.
type Phase struct {
	Name   string    `json:"name"` // "dhcp uefi-x64", "tftp ipxe.efi", "milestone ipxe-script", "boot complete"
	Kind   string    `json:"kind"` // dhcp, tftp, http, milestone, complete
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Offset float64   `json:"offset_seconds"` // Start relative to the boot's start
	Secs   float64   `json:"seconds"`
	Bytes  int64     `json:"bytes,omitempty"`
	MBps   float64   `json:"mbps,omitempty"`
	Detail string    `json:"detail,omitempty"` // TFTP options and retransmissions, transfer errors
	Server string    `json:"server,omitempty"` // the server that served it, in a fleet
}

// bootID names a boot in URLs: the MAC's hex digits and the start in Unix
// milliseconds, e.g. 525400123456-1767225600000.
func bootID(mac net.HardwareAddr, start time.Time) string { return bootIDOf(mac.String(), start) }

func bootIDOf(key string, start time.Time) string {
	return strings.ReplaceAll(key, ":", "") + "-" + strconv.FormatInt(start.UnixMilli(), 10)
}

// parseBootID reads the machine and start back from a boot ID; a fleet
// member's IDs have a third field, its server's tag.
func parseBootID(id string) (net.HardwareAddr, time.Time, bool) {
	parts := strings.SplitN(id, "-", 3)
	if len(parts) < 2 || len(parts[0]) < 12 || len(parts[0])%2 != 0 {
		return nil, time.Time{}, false
	}
	mac := make(net.HardwareAddr, len(parts[0])/2)
	if _, err := hex.Decode(mac, []byte(parts[0])); err != nil {
		return nil, time.Time{}, false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms < 0 {
		return nil, time.Time{}, false
	}
	return mac, time.UnixMilli(ms).UTC(), true
}

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round2(float64(bytes) / d.Seconds() / 1e6)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func secs(d time.Duration) float64 { return round2(d.Seconds()) }

// derive fills in Summary and Phases from the raw record.
func (b *Boot) derive() {
	b.Phases, b.Summary = b.Phases[:0], Summary{}
	// Consecutive packets from the same client stage are one DHCP phase.
	for i := 0; i < len(b.DHCP); {
		j := i
		for j+1 < len(b.DHCP) && b.DHCP[j+1].Client == b.DHCP[i].Client {
			j++
		}
		p := b.phase("dhcp "+b.DHCP[i].Client, "dhcp", b.DHCP[i].Time, b.DHCP[j].Time, 0)
		p.Server = b.DHCP[i].Server
		for _, x := range b.DHCP[i+1 : j+1] {
			if x.Server != p.Server {
				p.Server = "" // heard by several servers: each packet says which
			}
		}
		b.Phases = append(b.Phases, p)
		b.Summary.DHCPSeconds += b.DHCP[j].Time.Sub(b.DHCP[i].Time).Seconds()
		i = j + 1
	}
	b.Summary.DHCPSeconds = round2(b.Summary.DHCPSeconds)
	type span struct{ s, e time.Time }
	var spans []span
	for _, t := range b.Transfers {
		p := b.phase(t.Proto+" "+t.Name, t.Proto, t.Start, t.End, t.Bytes)
		p.Server = t.Server
		if t.Proto == "tftp" {
			p.Detail = "blksize=" + strconv.Itoa(t.BlockSize) + " windowsize=" + strconv.Itoa(t.WindowSize) +
				" retransmits=" + strconv.Itoa(t.Retransmits)
		}
		if t.Err != "" {
			p.Detail = strings.TrimSpace(p.Detail + " error: " + t.Err)
		}
		b.Phases = append(b.Phases, p)
		b.Summary.DownloadBytes += t.Bytes
		spans = append(spans, span{t.Start, t.End})
	}
	// Union of the transfer intervals, so parallel downloads are not
	// counted twice.
	sort.Slice(spans, func(i, j int) bool { return spans[i].s.Before(spans[j].s) })
	var busy time.Duration
	for i := 0; i < len(spans); {
		s, e := spans[i].s, spans[i].e
		for i++; i < len(spans) && !spans[i].s.After(e); i++ {
			if spans[i].e.After(e) {
				e = spans[i].e
			}
		}
		busy += e.Sub(s)
	}
	b.Summary.DownloadSeconds = secs(busy)
	b.Summary.DownloadMBps = mbps(b.Summary.DownloadBytes, busy)
	for _, m := range b.Milestones {
		p := b.phase("milestone "+m.Name, "milestone", m.Time, m.Time, 0)
		p.Server = m.Server
		b.Phases = append(b.Phases, p)
	}
	if b.State == StateComplete && b.End != nil {
		b.Summary.TotalSeconds = secs(b.End.Sub(b.Start))
		p := b.phase("boot complete", "complete", *b.End, *b.End, 0)
		p.Server = b.DoneServer
		b.Phases = append(b.Phases, p)
	}
	// By start; at the same instant a point (milestone) before a bar.
	sort.SliceStable(b.Phases, func(i, j int) bool {
		pi, pj := b.Phases[i], b.Phases[j]
		if !pi.Start.Equal(pj.Start) {
			return pi.Start.Before(pj.Start)
		}
		return pi.End.Before(pj.End)
	})
}

func (b *Boot) phase(name, kind string, start, end time.Time, bytes int64) Phase {
	return Phase{Name: name, Kind: kind, Start: start, End: end, Offset: secs(start.Sub(b.Start)),
		Secs: secs(end.Sub(start)), Bytes: bytes, MBps: mbps(bytes, end.Sub(start))}
}

// NBDSession is one diskless-root connection's totals. Sessions usually
// outlive the boot (they end at shutdown), so they are added to the
// machine's latest boot whatever its state.
type NBDSession struct {
	Export       string    `json:"export"`
	Remote       string    `json:"remote"`
	Start        time.Time `json:"start"`
	Seconds      float64   `json:"seconds"`
	BytesRead    int64     `json:"bytes_read"`
	BytesWritten int64     `json:"bytes_written"`
	Ops          int64     `json:"ops"`
	Err          string    `json:"error,omitempty"`
	Server       string    `json:"server,omitempty"` // the server that served the export
}
