package httpboot

import (
	"net"
	"net/url"
	"strconv"
	"sync"
)

// GroupHealth remembers what diskless machines' root proxies found of
// the multicast group in their latest root-io reports: whether it
// delivered. iPXE's mtftp:// cannot tell a network that drops multicast
// from a slow server and waits out four timeouts (about 2 s) before its
// own fallback; where machines have found the group dropped, scripts
// name HTTP alone. The root proxies try the group at every boot, so a
// network that starts delivering is noticed at the next report.
type GroupHealth struct {
	mu     sync.Mutex
	byMAC  map[string]bool
	latest *bool // the latest verdict of any machine
}

// NewGroupHealth knows nothing yet: every machine is given the group.
func NewGroupHealth() *GroupHealth { return &GroupHealth{byMAC: map[string]bool{}} }

// Observe takes a root-io report's query (agent.RootIOQuery). A group
// that is silent, or that delivered nothing while a read waited on it,
// is dropped; one that delivered anything delivers. Reports of machines
// not using the group (off), or with nothing to tell yet, change nothing.
func (g *GroupHealth) Observe(mac net.HardwareAddr, q url.Values) {
	mc, err1 := strconv.ParseUint(q.Get("multicast"), 10, 64)
	fb, err2 := strconv.ParseUint(q.Get("fallbacks"), 10, 64)
	var delivers bool
	switch {
	case q.Get("group") == "off" || err1 != nil || err2 != nil:
		return
	case q.Get("group") == "silent":
		delivers = false
	case mc > 0:
		delivers = true
	case fb > 0:
		delivers = false
	default:
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byMAC[mac.String()] = delivers
	g.latest = &delivers
}

// Delivers says whether scripts for mac should name the group: what mac's
// own latest report said, or else the latest of any machine's, or else
// yes.
func (g *GroupHealth) Delivers(mac net.HardwareAddr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d, ok := g.byMAC[mac.String()]; ok {
		return d
	}
	return g.latest == nil || *g.latest
}
