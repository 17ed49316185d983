package storm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/agent"
	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// proxyRoot is a machine's root read as the agent reads it when its
// command line turns the root proxy on (bootfleet.mcast=, bootfleet.proxy=):
// through rootproxy's Proxy, with its read cache sized from the emulated
// RAM by agent.ProxyConfig and its mcast.Receiver fed by the storm's one
// socket on the content's group (mcast.Hub), as two CPUs cannot read a
// socket per machine at the group's rate; their caches keep the content's
// bytes once (mcast.SharedSlab), as 24 GiB cannot hold 200 copies of a
// desktop's working set. Only the kernel's NBD socket between the
// page cache and the Proxy is left out: the trace's reads call the Proxy's
// export methods as the nbd server would for each request.
type proxyRoot struct {
	local netip.Addr   // the machine's address, the source of its unicast
	hubs  *hubs        // the storm's group sockets
	http  *http.Client // the machine's, leaving from its address
	ram   int64
	depth int
	log   *slog.Logger
}

// replay reads the trace through a fresh Proxy and returns the data bytes
// read and the Proxy's counters, telling moved of the bytes as each read
// completes.
func (pr proxyRoot) replay(ctx context.Context, o agent.Options, trace *Trace, moved func(int64)) (int64, *rootproxy.Stats, error) {
	servers := o.Root.Servers()
	dial := func(ctx context.Context, attempt int) (net.Conn, nbd.Negotiated, string, error) {
		s := servers[(attempt-1)%len(servers)]
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(pr.local, 0)), Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, "tcp", s.Addr())
		if err != nil {
			return nil, nbd.Negotiated{}, s.Addr(), err
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		info, err := nbd.ClientHandshake(c, o.Root.Export)
		if err != nil {
			c.Close()
			return nil, nbd.Negotiated{}, s.Addr(), err
		}
		c.SetDeadline(time.Time{})
		return c, info, s.Addr(), nil
	}
	up, err := rootproxy.NewUpstream(ctx, rootproxy.UpstreamConfig{Dial: dial, Timeout: o.IOTimeout,
		GiveUp: max(o.DeadConn, o.IOTimeout), Logger: pr.log})
	if err != nil {
		return 0, nil, err
	}
	defer up.Close()
	cfg, err := agent.ProxyConfig(o, up, pr.ram, pr.http, pr.log)
	if err != nil {
		return 0, nil, err
	}
	if cfg.Multicast != nil {
		hub, err := pr.hubs.get(cfg.Multicast.Group)
		if err != nil {
			return 0, nil, err
		}
		cfg.Multicast.Interface, cfg.Multicast.Hub = pr.hubs.ifi, hub
	}
	p, err := rootproxy.New(cfg)
	if err != nil {
		return 0, nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); p.Run(rctx) }()
	n, err := replayExport(ctx, p, trace, pr.depth, moved)
	stop()
	<-ran
	st := p.Stats()
	return n, &st, err
}

// readExport is the part of nbd's export a read replay calls.
type readExport interface {
	Info() nbd.ExportInfo
	ReadNow(b []byte, off int64, fua bool) (nbd.Span, bool)
	ReadSpan(b []byte, off int64) (nbd.Span, error)
}

// replayExport reads the trace's reads from e with up to depth in
// flight, in the trace's order as the kernel's readahead issues them.
func replayExport(ctx context.Context, e readExport, trace *Trace, depth int, moved func(int64)) (int64, error) {
	size := e.Info().Size
	reads := make([]Read, 0, len(trace.Reads))
	var longest uint32
	for _, r := range trace.Reads {
		if r, ok := r.Fit(uint64(size)); ok {
			reads = append(reads, r)
			longest = max(longest, r.Length)
		}
	}
	if len(reads) == 0 {
		return 0, fmt.Errorf("export of %d bytes is smaller than every read of the trace", size)
	}
	var next atomic.Int64
	var got atomic.Int64
	errs := make([]error, depth)
	var wg sync.WaitGroup
	for w := range depth {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, longest)
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(reads)) {
					return
				}
				r := reads[i]
				b := buf[:r.Length]
				if _, ok := e.ReadNow(b, int64(r.Offset), false); !ok {
					if _, err := e.ReadSpan(b, int64(r.Offset)); err != nil {
						errs[w] = fmt.Errorf("READ %d+%d: %w", r.Offset, r.Length, err)
						next.Store(int64(len(reads)))
						return
					}
				}
				got.Add(int64(r.Length))
				moved(int64(r.Length))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return got.Load(), err
	}
	return got.Load(), ctx.Err()
}

// hubReadBuffer is the receive buffer of a group's one socket in the
// storm: it holds the datagrams that arrive while the Hub hands earlier
// ones to every machine, about 1 s of a 500 Mbit/s group.
const hubReadBuffer = 64 << 20

// hubs holds the storm's one socket per group (mcast.Hub), which its
// machines' Receivers share; the rest of each Receiver is its own.
type hubs struct {
	mu  sync.Mutex
	ifi *net.Interface
	m   map[netip.AddrPort]*mcast.Hub
	mt  *mtftpGroup // iPXE's MTFTP group, for mtftp:// images
}

// get returns group's Hub, joining the group on first use.
func (h *hubs) get(group netip.AddrPort) (*mcast.Hub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hub, ok := h.m[group]; ok {
		return hub, nil
	}
	hub, err := mcast.ListenHub(group, h.ifi, hubReadBuffer)
	if err != nil {
		return nil, err
	}
	if h.m == nil {
		h.m = map[netip.AddrPort]*mcast.Hub{}
	}
	h.m[group] = hub
	go hub.Run()
	return hub, nil
}

func (h *hubs) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hub := range h.m {
		hub.Close()
	}
	h.m = nil
	if h.mt != nil {
		h.mt.close()
		h.mt = nil
	}
}
