package telemetry

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Merging the servers' records of one boot.
//
// In a fleet, one boot is recorded in parts: the server that answered
// DHCP has a record that a DHCPDISCOVER started (an anchor), the servers
// that only sent files, served the NBD root or took the DoneURL have
// partial records. The parts are joined when read, not when written:
// a write-time join would need the servers to agree on a boot's ID on
// the hot path (a lookup in the shared store for every DHCP packet and
// transfer, or a message between servers), and the servers never
// coordinate there; a server that dies or loses the store must go on
// booting machines. Each server writes only its own records, so no two
// writers contend for a row, and the read, which is rare and off the
// hot paths, does the joining from what every server stored.
//
// The rules, for the records of one MAC:
//   - A server's own records are never merged with each other: its
//     recorder already decided where its boots begin and end.
//   - An anchor of another server joins a boot when it starts before the
//     boot's limit (its done, the next boot any of its servers saw start,
//     or StaleAfter after its start) and is no restart: its first DHCP
//     packet comes from a stage (firmware, iPXE) the boot had not passed
//     before it.
//   - A partial record is read event by event: each event (DHCP packet,
//     transfer, milestone, NBD session, DoneURL) goes to the latest boot
//     that started before it, if it came before that boot's limit. A
//     milestone or NBD session goes there whatever its time: the machine
//     runs that boot until the next starts, and reports from it (an NBD
//     root moving to another server when its server died) or holds its
//     root long after the DoneURL. Events that fit no boot stay with
//     their record, and such leftovers of several servers that overlap in
//     time read as one boot.
//   - A DHCP request heard by several servers is one packet: the copy of
//     the server that answered is kept.
//   - The boot's ID is its first anchor's, its start the earliest event,
//     its state complete if the DoneURL was called on any server, else
//     failed if an anchor failed or the client reported a failure.
//   - Its power cause is the first its parts carry; without one, the
//     latest power record of any server that precedes it and no earlier
//     boot, within powerWindow (power.go). Power records are never boots
//     themselves.

// mergeSkew is how far apart two servers' clocks may be and their records
// still be read as one moment: an event this much before a boot's first
// DHCP packet, or after its limit, still counts as the boot's.
const mergeSkew = 2 * time.Second

// packetSkew is how far apart two servers may timestamp one broadcast
// DHCP packet. It is well under the firmware's retransmit interval, so
// a retransmission is never taken for a copy.
const packetSkew = 500 * time.Millisecond

// mergeLookback is how much earlier than a listing's Since the records
// are read, so a boot that started just before Since does not show its
// later parts as boots of their own.
const mergeLookback = 15 * time.Minute

// mergeBoots reads the records of any machines and servers as boots,
// newest first (Start, then ID, descending). A record that shares its
// boot with no other is returned as it is. Summary and Phases are left
// for the caller to derive.
func mergeBoots(recs []Boot, stale time.Duration) []Boot {
	byMAC := map[string][]Boot{}
	var macs []string
	for _, b := range recs {
		if _, ok := byMAC[b.MAC]; !ok {
			macs = append(macs, b.MAC)
		}
		byMAC[b.MAC] = append(byMAC[b.MAC], b)
	}
	var out []Boot
	for _, m := range macs {
		out = append(out, mergeMachine(byMAC[m], stale)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.After(out[j].Start)
		}
		return out[i].ID > out[j].ID
	})
	return out
}

// group is one boot being assembled from its parts.
type group struct {
	anchors  []Boot
	servers  map[string]bool // of the anchors
	start    time.Time       // the first anchor's
	limit    time.Time
	partials []Boot // one per partial record that gave events, holding those events
}

func byStart(bs []Boot) {
	sort.SliceStable(bs, func(i, j int) bool {
		if !bs[i].Start.Equal(bs[j].Start) {
			return bs[i].Start.Before(bs[j].Start)
		}
		return bs[i].ID < bs[j].ID
	})
}

// mergeMachine merges the records of one machine.
func mergeMachine(recs []Boot, stale time.Duration) []Boot {
	var anchors, partials, powers []Boot
	for _, b := range recs {
		switch {
		case isPowerRecord(b):
			powers = append(powers, b)
		case b.Partial:
			partials = append(partials, b)
		default:
			anchors = append(anchors, b)
		}
	}
	byStart(anchors)
	byStart(partials)
	var groups []*group
	for i, a := range anchors {
		lim := anchorLimit(anchors, i, stale)
		if n := len(groups); n > 0 && groups[n-1].joins(a) {
			g := groups[n-1]
			g.anchors = append(g.anchors, a)
			g.servers[a.Server] = true
			if lim.Before(g.limit) {
				g.limit = lim
			}
			continue
		}
		groups = append(groups, &group{anchors: []Boot{a}, servers: map[string]bool{a.Server: true}, start: a.Start, limit: lim})
	}
	var left []Boot // what of each partial record fits no boot
	for _, p := range partials {
		if rest, ok := spread(groups, p); ok {
			left = append(left, rest)
		}
	}
	out := make([]Boot, 0, len(groups)+len(left))
	for _, g := range groups {
		out = append(out, g.boot())
	}
	out = append(out, joinLeftovers(left)...)
	attachPower(out, powers)
	return out
}

// anchorLimit is when the boot that anchors[i] started ended as its
// server saw it: at its done, at that server's next boot of the machine,
// or StaleAfter after its start.
func anchorLimit(anchors []Boot, i int, stale time.Duration) time.Time {
	a := anchors[i]
	lim := a.Start.Add(stale)
	if a.State == StateComplete && a.End != nil && a.End.Before(lim) {
		lim = *a.End
	}
	for _, n := range anchors[i+1:] {
		if n.Server == a.Server {
			if n.Start.Before(lim) {
				lim = n.Start
			}
			break
		}
	}
	return lim
}

// joins says whether anchor a, of a server g has no anchor from, is
// another server's record of g's boot.
func (g *group) joins(a Boot) bool {
	if g.servers[a.Server] || !a.Start.Before(g.limit.Add(mergeSkew)) || len(a.DHCP) == 0 {
		return false
	}
	// A DISCOVER from a stage the boot had passed is the machine starting
	// over, as the Recorder itself reads it.
	first, before := clientStageOf(a.DHCP[0].Client), a.Start.Add(-mergeSkew)
	for _, b := range g.anchors {
		for _, x := range b.DHCP {
			if x.Client != "" && x.Time.Before(before) && clientStageOf(x.Client) > first {
				return false
			}
		}
		for _, t := range b.Transfers {
			if t.Proto == "tftp" && t.Start.Before(before) && stageTFTP > first {
				return false
			}
		}
	}
	return true
}

// clientStageOf is the stage of a DHCP client as pxe.Client.Firmware
// names it.
func clientStageOf(firmware string) int {
	switch {
	case firmware == "os":
		return stageOS
	case strings.HasPrefix(firmware, "ipxe-"):
		return stageIPXE
	}
	return stageFirmware
}

// spread hands each event of partial record p to the boot it belongs to,
// and returns what is left of p, if anything.
func spread(groups []*group, p Boot) (Boot, bool) {
	// Each piece keeps the record's power cause; the earliest boot that
	// gets one keeps it (attachPower).
	rest := Boot{ID: p.ID, MAC: p.MAC, Server: p.Server, Partial: true, State: StateBooting, Path: p.Path, Power: p.Power}
	given := map[*group]*Boot{}
	to := func(t time.Time, running bool) *Boot {
		i := sort.Search(len(groups), func(i int) bool { return groups[i].start.Add(-mergeSkew).After(t) }) - 1
		if i < 0 || !running && !t.Before(groups[i].limit.Add(mergeSkew)) {
			return &rest
		}
		g := groups[i]
		if given[g] == nil {
			g.partials = append(g.partials, Boot{ID: p.ID, MAC: p.MAC, Server: p.Server, Partial: true, State: StateBooting,
				Path: p.Path, Power: p.Power})
			given[g] = &g.partials[len(g.partials)-1]
		}
		return given[g]
	}
	// given holds pointers into g.partials: each group gets one entry per
	// partial record, appended above before any pointer to it is kept.
	for _, x := range p.DHCP {
		b := to(x.Time, false)
		b.DHCP = append(b.DHCP, x)
	}
	for _, x := range p.Transfers {
		b := to(x.Start, false)
		b.Transfers = append(b.Transfers, x)
	}
	for _, x := range p.Milestones {
		b := to(x.Time, true)
		b.Milestones = append(b.Milestones, x)
	}
	for _, x := range p.NBD {
		b := to(x.Start, true)
		b.NBD = append(b.NBD, x)
	}
	if x := p.RootIO; x != nil {
		b := to(x.Time, true)
		b.RootIO = laterRootIO(b.RootIO, x)
	}
	if p.State == StateComplete && p.End != nil {
		b := to(*p.End, false)
		b.State, b.End, b.DoneServer = StateComplete, p.End, p.DoneServer
	}
	if len(rest.DHCP)+len(rest.Transfers)+len(rest.Milestones)+len(rest.NBD) == 0 && rest.End == nil && rest.RootIO == nil {
		return Boot{}, false
	}
	rest.Start = firstEvent(rest)
	return rest, true
}

// joinLeftovers merges the leftovers of partial records of different
// servers that overlap in time: a boot whose DHCP no record holds.
func joinLeftovers(left []Boot) []Boot {
	byStart(left)
	var out []Boot
	for i := 0; i < len(left); {
		g := &group{servers: map[string]bool{left[i].Server: true}, partials: []Boot{left[i]}}
		end := lastEvent(left[i])
		for i++; i < len(left) && !g.servers[left[i].Server] && left[i].Start.Before(end.Add(mergeSkew)); i++ {
			g.partials = append(g.partials, left[i])
			g.servers[left[i].Server] = true
			if e := lastEvent(left[i]); e.After(end) {
				end = e
			}
		}
		out = append(out, g.boot())
	}
	return out
}

// boot assembles the group's parts into one boot record.
func (g *group) boot() Boot {
	if len(g.anchors) == 1 && len(g.partials) == 0 {
		return g.anchors[0]
	}
	parts := append(slices.Clone(g.anchors), g.partials...)
	first := parts[0]
	b := Boot{ID: first.ID, MAC: first.MAC, Server: first.Server, Partial: len(g.anchors) == 0, State: StateBooting}
	var done *Boot
	for i := range parts {
		p := &parts[i]
		b.DHCP = append(b.DHCP, p.DHCP...)
		b.Transfers = append(b.Transfers, p.Transfers...)
		b.Milestones = append(b.Milestones, p.Milestones...)
		b.NBD = append(b.NBD, p.NBD...)
		b.RootIO = laterRootIO(b.RootIO, p.RootIO)
		for _, s := range p.Path {
			if !slices.Contains(b.Path, s) && len(b.Path) < maxPath {
				b.Path = append(b.Path, s)
			}
		}
		if p.State == StateComplete && p.End != nil && (done == nil || p.End.Before(*done.End)) {
			done = p
		}
		if !slices.Contains(b.Parts, p.ID) {
			b.Parts = append(b.Parts, p.ID)
		}
		if b.Power == nil {
			b.Power = p.Power
		}
		if p.Server != "" && !slices.Contains(b.Servers, p.Server) {
			b.Servers = append(b.Servers, p.Server)
		}
	}
	sort.SliceStable(b.DHCP, func(i, j int) bool { return b.DHCP[i].Time.Before(b.DHCP[j].Time) })
	b.DHCP = dedupeDHCP(b.DHCP)
	sort.SliceStable(b.Transfers, func(i, j int) bool { return b.Transfers[i].Start.Before(b.Transfers[j].Start) })
	sort.SliceStable(b.Milestones, func(i, j int) bool { return b.Milestones[i].Time.Before(b.Milestones[j].Time) })
	sort.SliceStable(b.NBD, func(i, j int) bool { return b.NBD[i].Start.Before(b.NBD[j].Start) })
	switch {
	case done != nil:
		b.State, b.End, b.DoneServer = StateComplete, done.End, done.DoneServer
		if b.DoneServer == "" {
			b.DoneServer = done.Server
		}
	default:
		for _, a := range g.anchors {
			if a.State == StateFailed {
				b.State, b.Reason = StateFailed, a.Reason
				break
			}
		}
		for _, m := range b.Milestones {
			if reason, ok := milestoneFailure(m.Name); ok && b.State != StateFailed {
				b.State, b.Reason = StateFailed, reason
			}
		}
	}
	b.Start = firstEvent(b)
	for _, a := range g.anchors {
		if a.Start.Before(b.Start) {
			b.Start = a.Start
		}
	}
	slices.Sort(b.Servers)
	if len(b.Parts) < 2 {
		b.Parts, b.Servers = nil, nil
	}
	if b.Path == nil {
		b.Path = []string{}
	}
	return b
}

// dedupeDHCP keeps one copy of each request that several servers heard,
// the answering server's when one of them answered. xs is in time order.
func dedupeDHCP(xs []DHCPExchange) []DHCPExchange {
	answered := map[string]bool{}
	for _, x := range xs {
		if x.Client == "" { // a reply: only the server that sent it has it
			answered[x.Server] = true
		}
	}
	out := make([]DHCPExchange, 0, len(xs))
	for _, x := range xs {
		dup := -1
		for j := len(out) - 1; x.Client != "" && j >= 0 && x.Time.Sub(out[j].Time) <= packetSkew; j-- {
			if y := out[j]; y.Client == x.Client && y.Type == x.Type && y.Server != x.Server {
				dup = j
				break
			}
		}
		switch {
		case dup < 0:
			out = append(out, x)
		case answered[x.Server] && !answered[out[dup].Server]:
			out[dup] = x
		}
	}
	return out
}

// firstEvent and lastEvent bound a record's events in time; a record
// without events is its start.
func firstEvent(b Boot) time.Time {
	t := time.Time{}
	see := func(x time.Time) {
		if t.IsZero() || x.Before(t) {
			t = x
		}
	}
	eachEvent(b, see)
	if t.IsZero() {
		return b.Start
	}
	return t
}

func lastEvent(b Boot) time.Time {
	t := b.Start
	eachEvent(b, func(x time.Time) {
		if x.After(t) {
			t = x
		}
	})
	return t
}

func eachEvent(b Boot, see func(time.Time)) {
	for _, x := range b.DHCP {
		see(x.Time)
	}
	for _, x := range b.Transfers {
		see(x.Start)
	}
	for _, x := range b.Milestones {
		see(x.Time)
	}
	for _, x := range b.NBD {
		see(x.Start)
	}
	if b.End != nil {
		see(*b.End)
	}
}

// laterRootIO is the later of two root-io reports: each report holds the
// boot's totals so far, so the last one is the boot's.
func laterRootIO(a, b *RootIO) *RootIO {
	if a == nil || b != nil && b.Time.After(a.Time) {
		return b
	}
	return a
}
