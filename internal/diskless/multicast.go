package diskless

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/mcastgroup"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// Multicast configures the multicast of roots' base content: one Sender
// on the server's interface, each content on its own group.
type Multicast struct {
	Listen    netip.AddrPort // SERVER_IP:PORT of the request socket; the groups use the same port
	Interface *net.Interface // where the groups go out; nil: as routing says
	TTL       int
	Rate      int64 // bytes per second on the wire
	Space     mcastgroup.Space
	// BlocksURL is where agents of server-side overlays fetch the blocks
	// their overlay holds (OverlayBlocksPath on this server's HTTP).
	BlocksURL string
	// OrderURL is where agents read a content's read order, the sha256
	// appended (ReadOrderPath on this server's HTTP).
	OrderURL string
}

// OverlayBlocksPath is the HTTP route where an agent reads which blocks
// its server-side overlay holds, its export name as the bearer token.
const OverlayBlocksPath = "/nbd/overlay-blocks"

// multicaster is the running Sender and the contents it serves.
type multicaster struct {
	cfg    Multicast
	conn   *net.UDPConn
	sender *mcast.Sender
	log    *slog.Logger

	mu    sync.Mutex
	files map[string]*os.File // by sha256: the content served, open
	// shas names the contents served by id, for the Sender's OnRead,
	// which runs under the Sender's lock while serve holds mu to Add.
	shas sync.Map // chunkwire.ContentID -> string
}

func newMulticaster(cfg Multicast, order *readorder.Learner, log *slog.Logger) (*multicaster, error) {
	conn, err := mcast.ListenSender(cfg.Listen, cfg.Interface, cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("%w (set multicast.port, or multicast.mode: off)", err)
	}
	// Port 0 takes a free port; the agents must be told the real one.
	cfg.Listen = netip.AddrPortFrom(cfg.Listen.Addr(), uint16(conn.LocalAddr().(*net.UDPAddr).Port))
	m := &multicaster{cfg: cfg, conn: conn, log: log, files: map[string]*os.File{}}
	onRead := func(id chunkwire.ContentID, first, last uint32) {
		if sha, ok := m.shas.Load(id); ok {
			order.Note(sha.(string), first, last)
		}
	}
	if m.sender, err = mcast.NewSender(conn, mcast.SenderConfig{Rate: cfg.Rate, Logger: log, OnRead: onRead}); err != nil {
		conn.Close()
		return nil, err
	}
	return m, nil
}

// run sends until ctx ends.
func (m *multicaster) run(ctx context.Context) error {
	defer m.close()
	m.log.Info("multicast of diskless roots on", "requests", m.cfg.Listen.String(), "rate_bytes", m.cfg.Rate, "space", m.cfg.Space.Prefix().String(), "ttl", m.cfg.TTL)
	return m.sender.Run(ctx)
}

func (m *multicaster) close() {
	m.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for sha, f := range m.files {
		f.Close()
		delete(m.files, sha)
	}
}

// serve multicasts content sha (from blobs) from now on, and returns the
// bootfleet.mcast= value that names it. Content stays served while the
// server runs: an image's content is immutable, and its file stays
// readable while open even after `image rm`.
func (m *multicaster) serve(blobs *imagestore.Store, sha string) (string, error) {
	var sum [sha256.Size]byte
	if _, err := hex.Decode(sum[:], []byte(sha)); err != nil || len(sha) != 2*sha256.Size {
		return "", fmt.Errorf("multicast: content %q is not a sha256", sha)
	}
	id := chunkwire.ContentIDOf(sum)
	group := netip.AddrPortFrom(m.cfg.Space.Group(sum), m.cfg.Listen.Port())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files[sha] == nil {
		path, err := blobs.Path(sha)
		if err != nil {
			return "", err
		}
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("multicast: open content %.12s: %w", sha, err)
		}
		st, err := f.Stat()
		if err == nil {
			err = m.sender.Add(mcast.Content{ID: id, Group: group, Size: st.Size(), Data: f})
		}
		if err != nil {
			f.Close()
			return "", err
		}
		m.files[sha] = f
		m.shas.Store(id, sha)
		m.log.Info("multicasting image content", "sha256", sha[:12], "group", group.String(), "bytes", st.Size())
	}
	return rootarg.Multicast{Group: group, Server: m.cfg.Listen, Content: id}.Arg(), nil
}

// SetBlocksURL says where agents of server-side overlays fetch the
// blocks their overlay holds: this server's OverlayBlocksPath. Call it
// before Serve.
func (s *Service) SetBlocksURL(url string) {
	if s.mc != nil {
		s.mc.cfg.BlocksURL = url
	}
}

// stats is what has been multicast of content sha.
func (m *multicaster) stats(sha string) (mcast.ContentStats, bool) {
	var sum [sha256.Size]byte
	if _, err := hex.Decode(sum[:], []byte(sha)); err != nil {
		return mcast.ContentStats{}, false
	}
	return m.sender.ContentStats(chunkwire.ContentIDOf(sum))
}

// rootArgs are the kernel parameters a boot of content sha with overlay
// needs for multicast: the group, and for a server-side overlay where its
// agent learns the overlay's blocks.
func (s *Service) rootArgs(sha, overlay string) (string, error) {
	if s.mc == nil {
		return "", nil
	}
	arg, err := s.mc.serve(s.blobs, sha)
	if err != nil {
		return "", err
	}
	args := rootarg.MulticastKey + "=" + arg
	if !inventory.ClientOverlay(overlay) && s.mc.cfg.BlocksURL != "" {
		args += " bootfleet.overlay.blocks=" + s.mc.cfg.BlocksURL
	}
	if s.mc.cfg.OrderURL != "" {
		args += " " + rootarg.ReadOrderKey + "=" + s.mc.cfg.OrderURL + sha
	}

	return args, nil
}

// MulticastStats is what has been multicast of content sha; false when
// multicast is off or the content was never asked for.
func (s *Service) MulticastStats(sha string) (mcast.ContentStats, bool) {
	if s.mc == nil {
		return mcast.ContentStats{}, false
	}
	return s.mc.stats(sha)
}

// SenderStats is the multicast Sender's counters; false when off.
func (s *Service) SenderStats() (mcast.SenderStats, bool) {
	if s.mc == nil {
		return mcast.SenderStats{}, false
	}
	return s.mc.sender.Stats(), true
}

// Collectors are the multicast sender's series for /metrics; none when
// multicast is off.
func (s *Service) Collectors() []prometheus.Collector {
	if s.mc == nil {
		return nil
	}
	st := func(f func(mcast.SenderStats) uint64) func() float64 {
		return func() float64 { return float64(f(s.mc.sender.Stats())) }
	}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_sent_bytes_total",
			Help: "UDP payload bytes of the multicast data datagrams of roots' base content (1 KiB of content and a 32-byte header each), each chunk once however many machines asked."},
			st(func(x mcast.SenderStats) uint64 { return x.Bytes })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_again_bytes_total",
			Help: "Of bootfleet_multicast_sent_bytes_total, the bytes of chunks multicast before: repairs of lost fragments and machines that asked after the chunk had passed."},
			st(func(x mcast.SenderStats) uint64 { return x.Again })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_sent_datagrams_total",
			Help: "Multicast data datagrams sent."}, st(func(x mcast.SenderStats) uint64 { return x.Datagrams })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_send_errors_total",
			Help: "Multicast data datagrams the server's socket refused (a full buffer, no route, or a local firewall dropping the group)."},
			st(func(x mcast.SenderStats) uint64 { return x.SendErrors })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_requests_total",
			Help: "Chunk requests from agents, repairs included."}, st(func(x mcast.SenderStats) uint64 { return x.Requests })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bootfleet_multicast_repairs_total",
			Help: "Requests for lost fragments."}, st(func(x mcast.SenderStats) uint64 { return x.Repairs })),
	}
}

// OverlayBlocksHandler serves OverlayBlocksPath: the blocks the caller's
// server-side overlay holds, to the agent holding its export name.
func (s *Service) OverlayBlocksHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || name == "" {
			http.Error(w, "want Authorization: Bearer EXPORT, the export name of this boot", http.StatusUnauthorized)
			return
		}
		remote, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
		b, err := s.disks.OverlayBlocks(name, remote)
		switch {
		case errors.Is(err, nbd.ErrRefused) || errors.Is(err, nbd.ErrUnknownExport):
			http.Error(w, "export refused", http.StatusForbidden)
			return
		case err != nil:
			s.log.Warn("overlay blocks not served", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "overlay not readable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
}
