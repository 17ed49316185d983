package agent

import (
	"net/url"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// RootIOMilestone is the milestone the root proxy reports its counters
// with, as query parameters, so the machine's boot record shows how its
// root arrived (multicast against unicast, cache hits and misses,
// fallbacks). The server keeps the latest report; it is not a step of
// the boot.
const RootIOMilestone = "root-io"

// RootIOQuery is a report's query: bytes by multicast and by unicast,
// cache hit and miss bytes, reads of written blocks, fallbacks, the
// group's datagrams lost (and of those, dropped by the machine's own full
// socket) and the repairs asked, the chunks asked ahead
// and those used, and the state of the group (off, on, silent, lossy).
func RootIOQuery(st rootproxy.Stats) string {
	u := func(v uint64) []string { return []string{strconv.FormatUint(v, 10)} }
	return url.Values{"multicast": u(st.MulticastBytes), "unicast": u(st.UnicastBytes), "hits": u(st.HitBytes),
		"misses": u(st.MissBytes), "written": u(st.WrittenBytes), "fallbacks": u(st.Fallbacks),
		"lost": u(st.Lost), "overflow": u(st.Overflow), "repairs": u(st.Repairs), "ahead": u(st.AheadChunks), "ahead_used": u(st.AheadUsed),
		"group": {st.Multicast}}.Encode()
}
