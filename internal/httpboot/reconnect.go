package httpboot

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ReconnectMilestonePrefix starts the milestone bootfleet-agent reports
// to the server it moved a machine's NBD root to after its connection
// died (agent.ReconnectMilestonePrefix); the rest is the reconnect time,
// e.g. nbd-reconnected-840ms. The query says which server the root left
// (from), the export's label and after_ms.
const ReconnectMilestonePrefix = "nbd-reconnected-"

// RootIOMilestone is the milestone bootfleet-agent's root proxy reports
// its counters with (agent.RootIOMilestone), as query parameters: not a
// step of the boot but how its root arrived, which RootIORecorder keeps.
const RootIOMilestone = "root-io"

// RootIORecorder keeps the root-io reports of machines' root proxies. It
// must not block; an error means the report was malformed.
type RootIORecorder interface {
	RootIO(mac net.HardwareAddr, report url.Values, remote string) error
}

// logReconnect logs a reconnect milestone on the server the root moved
// to: the admin of a fleet whose server died reads here which machines
// carried on, and how long their disks stalled.
func (s *server) logReconnect(mac net.HardwareAddr, name string, r *http.Request) {
	ms, ok := strings.CutPrefix(name, ReconnectMilestonePrefix)
	if !ok {
		return
	}
	q := r.URL.Query()
	after, err := strconv.ParseInt(strings.TrimSuffix(ms, "ms"), 10, 64)
	if err != nil || after < 0 {
		s.log.Warn("nbd reconnect reported with an unreadable time", "mac", mac.String(), "milestone", name, "remote", r.RemoteAddr)
		return
	}
	s.log.Info("machine's NBD root reconnected to this server", "mac", mac.String(), "export", trimLabel(q.Get("export")),
		"from", trimLabel(q.Get("from")), "after", (time.Duration(after) * time.Millisecond).String(), "remote", r.RemoteAddr)
}

// trimLabel bounds what a client's query puts in a log line.
func trimLabel(s string) string {
	const limit = 80
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
