package telemetry

import (
	"net"
	"sort"
	"strings"
	"time"
)

// PowerCause is the power command a boot followed: the record of a boot
// that bootfleet started says when and why, so a storm bootfleet started
// is timed from power-on to every machine up.
type PowerCause struct {
	Time   time.Time `json:"time"`   // when the driver was called
	Action string    `json:"action"` // on, cycle or reset
	Cause  string    `json:"cause"`  // who asked: "api:TOKEN" or "schedule:NAME"
}

// powerWindow is how long a power command waits for the boot it causes:
// firmware reaches DHCP within seconds of power-on, so a boot that starts
// later than this follows something else.
const powerWindow = 10 * time.Minute

// A read from mergeLookback before a boot must reach the power record it
// follows (history.go): this fails to compile if it would not.
const _ = uint64(mergeLookback - powerWindow - mergeSkew)

// powerSuffix ends the ID of a power record, so it never takes the ID of
// a boot its server started in the same millisecond.
const powerSuffix = "-p"

// Powered notes that bootfleet just powered mac on (action on, cycle or
// reset) for cause; the machine's next boot that starts within
// powerWindow carries it. This server's own boots take it from memory,
// at their start. In a fleet the boot may start on another server (DHCP
// balanced, a schedule run by one server only), so the command is also
// queued for the store as a power record of its own, and reads attach it
// to the boot whichever server recorded that (attachPower). Outside a
// fleet nothing is stored: the boot is always this server's.
func (r *Recorder) Powered(mac net.HardwareAddr, action, cause string) {
	now := r.cfg.Now().UTC()
	p := PowerCause{Time: now, Action: action, Cause: cause}
	r.queuePower(mac.String(), p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.powered) >= r.cfg.MaxBoots {
		for k, p := range r.powered { // a flood of commands: drop the stale
			if now.Sub(p.Time) > powerWindow {
				delete(r.powered, k)
			}
		}
		if len(r.powered) >= r.cfg.MaxBoots {
			return
		}
	}
	r.powered[mac.String()] = p
}

// queuePower offers the power record of p to the Ended queue in a fleet.
func (r *Recorder) queuePower(key string, p PowerCause) {
	if r.cfg.Server == "" || r.ended == nil {
		return
	}
	rec := Boot{ID: bootIDOf(key, p.Time) + r.idTag + powerSuffix, MAC: key, Start: p.Time, State: StateComplete,
		Server: r.cfg.Server, Partial: true, Power: &p, Path: []string{}, DHCP: []DHCPExchange{}, Transfers: []Transfer{},
		Milestones: []Milestone{}}
	r.offer(rec)
}

// takePower returns the power command that the boot of key starting at
// now follows, if any, and forgets it. Call with mu held.
func (r *Recorder) takePower(key string, now time.Time) *PowerCause {
	p, ok := r.powered[key]
	if !ok {
		return nil
	}
	delete(r.powered, key)
	if now.Sub(p.Time) > powerWindow || now.Before(p.Time) {
		return nil
	}
	return &p
}

// isPowerRecord says whether b is a power record (queuePower): it holds
// no event of a boot, only the command, and never reads as a boot. A
// server of an older version reads it as a partial record without
// events, which its merge drops.
func isPowerRecord(b Boot) bool {
	return b.Partial && b.Power != nil && strings.HasSuffix(b.ID, powerSuffix)
}

// attachPower gives the machine's boots (merged, any order) the power
// commands of its power records, as the Recorder does in memory: a
// command ties to the first boot that starts after it (mergeSkew earlier
// counts, for the servers' clocks), if that starts within powerWindow;
// of several commands before one boot, the latest; and a boot whose own
// parts carry a cause keeps it. A command ties to one boot: a later boot
// that carries it too (the server that ran it saw none of the first boot
// and gave it to its next) loses it.
func attachPower(boots []Boot, powers []Boot) {
	caused := 0
	for _, b := range boots {
		if b.Power != nil {
			caused++
		}
	}
	if len(boots) == 0 || len(powers) == 0 && caused < 2 {
		return // nothing to attach or untie: a lone server's boots
	}
	order := make([]int, len(boots))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return boots[order[i]].Start.Before(boots[order[j]].Start) })
	defer untieRepeats(boots, order)
	sort.SliceStable(powers, func(i, j int) bool { return powers[i].Power.Time.Before(powers[j].Power.Time) })
	latest := map[int]PowerCause{}
	for _, p := range powers {
		from := p.Power.Time.Add(-mergeSkew)
		k := sort.Search(len(order), func(k int) bool { return !boots[order[k]].Start.Before(from) })
		if k == len(order) || boots[order[k]].Start.Sub(p.Power.Time) > powerWindow {
			continue // no boot followed it in time
		}
		latest[order[k]] = *p.Power
	}
	for i, p := range latest {
		if boots[i].Power == nil {
			boots[i].Power = &p
		}
	}
}

// untieRepeats takes a power cause off every boot but the first, in
// order, that carries it.
func untieRepeats(boots []Boot, order []int) {
	type command struct {
		ns            int64
		action, cause string
	}
	seen := map[command]bool{}
	for _, i := range order {
		p := boots[i].Power
		if p == nil {
			continue
		}
		c := command{p.Time.UnixNano(), p.Action, p.Cause}
		if seen[c] {
			boots[i].Power = nil
		}
		seen[c] = true
	}
}
