package membership

import (
	"hash/fnv"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// DefaultBootBytes is what a boot is taken to pull from the server its
// script names first when the caller does not know the size.
const DefaultBootBytes = 64 << 20

// SpreadConfig configures a Spread.
type SpreadConfig struct {
	View *View // required
	// SelfBaseURL is this server's HTTP base, used when its own row in
	// the view is missing (not yet registered) or names none.
	SelfBaseURL string
	// Holders returns the names of the servers holding content sha256,
	// and false when it does not know (then every live server is taken
	// to hold it). Nil: never known. It is called on every Order and
	// must read memory, not the store.
	Holders func(sha string) (names []string, known bool)
	// Heartbeat is the interval of the servers' heartbeats, over which
	// their reported bytes/s is taken to continue. Default 10 s.
	Heartbeat time.Duration
}

// Spread orders the fleet's servers for one machine's boot: the least
// loaded live server that holds the content first, the others after it
// as fallbacks.
//
// A server's load is its reported bytes/s over one heartbeat, plus the
// bytes this server has already sent other machines to it since the
// view was last read: the reported figure is up to 15 s old, and without
// counting its own choices a server would send a whole boot storm to
// whichever peer looked idle at the last read. This server counts one
// boot lighter than it is: sending a machine elsewhere is worth it only
// when a peer is lighter by more than the boot itself, and DHCP load
// balancing already spreads machines over the servers that render their
// scripts, so an idle fleet keeps each machine on the server it asked.
// Other servers of equal load are ordered by a hash of the machine's MAC
// and the server's name (rendezvous hashing), so machines sent away
// spread evenly and each goes to the same server boot after boot.
type Spread struct {
	cfg SpreadConfig

	mu       sync.Mutex
	epoch    uint64           // the view's read the assignments count from
	assigned map[string]int64 // bytes sent to each server since epoch
}

// NewSpread returns a Spread over cfg.View.
func NewSpread(cfg SpreadConfig) *Spread {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	return &Spread{cfg: cfg, assigned: map[string]int64{}}
}

// Order returns the live servers able to serve content sha ("" for files
// every server is taken to have), best first, and counts bytes (0:
// DefaultBootBytes) against the first. This server is always among them:
// it can serve what it lacks by fetching it first.
func (s *Spread) Order(mac net.HardwareAddr, sha string, bytes int64) []inventory.ServerInfo {
	live := s.cfg.View.Live()
	self := s.cfg.View.Self()
	cands := live
	if sha != "" && s.cfg.Holders != nil {
		if names, known := s.cfg.Holders(sha); known {
			cands = slices.DeleteFunc(slices.Clone(live), func(sv inventory.ServerInfo) bool {
				return sv.Name != self && !slices.Contains(names, sv.Name)
			})
		}
	}
	if bytes <= 0 {
		bytes = DefaultBootBytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.cfg.View.Reads(); r != s.epoch {
		s.epoch, s.assigned = r, map[string]int64{}
	}
	load := make(map[string]int64, len(cands))
	for _, sv := range cands {
		load[sv.Name] = sv.Load.BytesPerSec*int64(s.cfg.Heartbeat/time.Second) + s.assigned[sv.Name]
		if sv.Name == self {
			load[sv.Name] -= bytes
		}
	}
	order := slices.Clone(cands)
	slices.SortFunc(order, func(a, b inventory.ServerInfo) int {
		if la, lb := load[a.Name], load[b.Name]; la != lb {
			if la < lb {
				return -1
			}
			return 1
		}
		if a.Name == self || b.Name == self {
			return boolCmp(b.Name == self, a.Name == self)
		}
		ha, hb := rendezvous(mac, a.Name), rendezvous(mac, b.Name)
		switch {
		case ha > hb:
			return -1
		case ha < hb:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(order) > 0 {
		s.assigned[order[0].Name] += bytes
	}
	return order
}

// BaseURLs is Order as HTTP bases, best first; servers that registered
// no HTTP base are left out, and this server's comes from SelfBaseURL
// when its row has none.
func (s *Spread) BaseURLs(mac net.HardwareAddr, sha string, bytes int64) []string {
	var urls []string
	for _, sv := range s.Order(mac, sha, bytes) {
		u := BaseURL(sv)
		if sv.Name == s.cfg.View.Self() && s.cfg.SelfBaseURL != "" {
			u = s.cfg.SelfBaseURL
		}
		if u != "" && !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls
}

// rendezvous is the weight of server name for mac: the server with the
// highest weight wins among equals, and removing a server moves only the
// machines it had.
func rendezvous(mac net.HardwareAddr, name string) uint64 {
	h := fnv.New64a()
	h.Write(mac)
	h.Write([]byte{0})
	h.Write([]byte(name))
	return h.Sum64()
}

// Root is Order for a machine's NBD root of content sha, counting a
// default boot's bytes: it fits the Order the diskless roots take.
func (s *Spread) Root(mac net.HardwareAddr, sha string) []inventory.ServerInfo {
	return s.Order(mac, sha, 0)
}

// boolCmp orders true before false.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
