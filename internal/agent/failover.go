package agent

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// Failover: when the kernel reports the root's NBD link dead, the watcher
// tries the servers of bootfleet.root= round robin, starting with the one
// after the server that failed, so a dead server costs one attempt, not a
// dead-connection timeout. Every server in the list accepts the export
// (the server only lists several for exports that every server holding
// the image serves alike), so the kernel gets a socket to the same disk.

// Pauses between rounds of reconnect attempts: none within a round, since
// each attempt is a different server, and a doubling pause after a round
// that reached none of them, so a fleet that is down entirely is not
// hammered.
const (
	firstRoundPause = 250 * time.Millisecond
	maxRoundPause   = 5 * time.Second
)

// rotation picks the server of each reconnect attempt.
type rotation struct {
	n, at int // servers; index of the last one tried
	tried int // attempts in the current round
	pause time.Duration
}

// newRotation starts after failed, the index of the server whose link died.
func newRotation(n, failed int) *rotation {
	return &rotation{n: max(n, 1), at: failed, pause: firstRoundPause}
}

// next returns the index of the server to try and how long to wait first.
func (r *rotation) next() (int, time.Duration) {
	var wait time.Duration
	if r.tried == r.n {
		wait, r.tried = r.pause, 0
		r.pause = min(2*r.pause, maxRoundPause)
	}
	r.tried++
	r.at = (r.at + 1) % r.n
	return r.at, wait
}

// reconnectMilestone names the milestone a reconnect reports: the time
// from the dead link to the new socket, in the name so the boot record
// keeps it (milestones carry a name and a time only).
func reconnectMilestone(d time.Duration) string {
	return fmt.Sprintf("%s%dms", ReconnectMilestonePrefix, d.Milliseconds())
}

// ReconnectMilestonePrefix starts the milestone the watcher reports to the
// server it reconnected to; the rest is the reconnect time, e.g.
// nbd-reconnected-840ms.
const ReconnectMilestonePrefix = "nbd-reconnected-"

// milestonesAt moves the bootfleet.milestones= URL base to server s: the
// same scheme, port and path on s's host. The server that rendered the URL
// may be the one that died; the fleet's servers share one HTTP port. An
// unparsable base is returned as it is.
func milestonesAt(base string, s rootarg.Server) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	if p := u.Port(); p != "" {
		u.Host = net.JoinHostPort(s.Host, p)
	} else if ip := net.ParseIP(s.Host); ip != nil && ip.To4() == nil {
		u.Host = "[" + s.Host + "]"
	} else {
		u.Host = s.Host
	}
	return u.String()
}

// reconnectReport is the URL the watcher GETs after a reconnect: the
// milestone, with the server it left and a label of the export (never the
// whole name, which opens the disk) for the server's log.
func reconnectReport(base string, to, from rootarg.Server, export string, after time.Duration) string {
	q := url.Values{"from": {from.Addr()}, "export": {exportLabel(export)}, "after_ms": {strconv.FormatInt(after.Milliseconds(), 10)}}
	return milestonesAt(base, to) + "/" + reconnectMilestone(after) + "?" + q.Encode()
}

// exportLabel is the start of an export name: enough to tell exports
// apart in a log (bootfleet's names start with the MAC), not enough to open one.
func exportLabel(name string) string {
	const keep = 24
	if len(name) <= keep {
		return name[:len(name)/2] + "…"
	}
	return name[:keep] + "…"
}
