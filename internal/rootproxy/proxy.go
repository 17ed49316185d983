package rootproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// ExportName is the one export the proxy serves to the kernel.
const ExportName = "root"

// DirtyShift is the block size, as a shift, in which the proxy tracks the
// blocks the machine wrote: 4 KiB, the page the kernel writes in.
const DirtyShift = 12

// Config says what the proxy serves and where the bytes come from.
type Config struct {
	Upstream *Upstream // required
	// CacheBytes bounds the read cache of the base, allocated up front;
	// 0 for none: every read goes to the servers, as on the direct path.
	CacheBytes int64
	// Base says the blocks of the export nobody wrote are the image
	// content, which the cache and the multicast group carry: true for a
	// read-only export of the base (client-ram, client-disk) and for a
	// server-side overlay whose written blocks are in Overlay. False keeps
	// the cache off.
	Base bool
	// Overlay is the blocks the server's overlay held at connect, in
	// blocks of 1<<OverlayShift bytes; nil for none. They are read from
	// the server, never from the cache.
	Overlay      *blockset.Set
	OverlayShift uint8
	// Multicast, when not nil, is the content's group; its Cache is the
	// proxy's. Nil reads misses by unicast.
	Multicast *mcast.ReceiverConfig
	// Order is the order in which earlier boots of the content first read
	// its chunks (readorder); nil for none. ReadAhead is how many chunks
	// of it past a miss the proxy asks the group for, flagged so the
	// server sends them behind every read: 0 (the default without an
	// order) for none, at most MaxReadAhead. Every chunk asked for goes
	// to every machine of the group, so read-ahead off the order costs
	// the whole storm; following the order of real boots keeps it to
	// what the boot reads.
	Order     []uint32
	ReadAhead int
	// Probe is how long the first miss waits on a group that has never
	// delivered before it is read by unicast; DefaultProbe when zero.
	// Later misses, until the group delivers, do not wait at all, so a
	// network that drops the group costs one Probe rather than the
	// Receiver's Silence.
	Probe  time.Duration
	Logger *slog.Logger
}

// DefaultProbe is Config.Probe's default: many round trips on a LAN and
// the time the lowest rate (1 Mbit/s) takes to send the first datagram,
// which is all the probe waits for. A group slower than that is only read
// by unicast until it delivers.
const DefaultProbe = 10 * time.Millisecond

// Stats is what the proxy has done: the figures a boot record shows.
type Stats struct {
	MulticastBytes uint64 // base bytes that arrived from the group
	UnicastBytes   uint64 // bytes read from the servers
	HitBytes       uint64 // bytes read answered from the cache
	MissBytes      uint64 // bytes read the cache did not hold
	WrittenBytes   uint64 // bytes read of blocks the machine wrote
	Fallbacks      uint64 // reads that waited on the group and went to unicast
	Lost           uint64 // the group's datagrams this machine missed
	Overflow       uint64 // of those, the ones its own socket dropped, full
	Repairs        uint64 // requests for lost fragments it sent
	AheadChunks    uint64 // chunks asked for as read-ahead
	AheadUsed      uint64 // of those, chunks the machine read later
	// GroupReadBuffer is the group socket's receive buffer as the kernel
	// granted it: a small one loses bursts while the machine is busy.
	GroupReadBuffer int
	Multicast       string // off, on, silent (nothing arrived) or lossy
}

// Proxy is the export the kernel's NBD client reads the root from: the
// cache, the group and the servers behind one nbd.Export.
type Proxy struct {
	up     *Upstream
	info   nbd.ExportInfo
	flags  nbd.TransmissionFlags
	cache  *chunkCache // nil: none
	rcv    *mcast.Receiver
	ahead  *readAhead // nil: no order or no read-ahead
	log    *slog.Logger
	spans  chan []byte // preallocated buffers of whole-chunk reads
	zeroes []byte
	probe  time.Duration
	// probeLapsed is set once a probe waited in vain: misses go to
	// unicast without waiting until the group delivers.
	probeLapsed atomic.Bool
	// lastReprobe is when a miss last asked a gone group (unix nanos).
	lastReprobe atomic.Int64

	dmu   sync.Mutex
	dirty *blockset.Set // blocks of 1<<DirtyShift not from the base

	hits, misses, unicast, written, fallbacks atomic.Uint64
}

// spanBuffers and spanBytes size the buffers of unicast reads rounded out
// to whole chunks: the kernel's largest request by default (1280 KiB)
// plus a chunk on either side.
const (
	spanBuffers = 4
	spanBytes   = 1280<<10 + 2*chunkwire.ChunkSize
)

// New builds the proxy over cfg.Upstream. Run its Receiver with Run.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == nil {
		return nil, errors.New("rootproxy: no upstream")
	}
	in := cfg.Upstream.Info()
	p := &Proxy{up: cfg.Upstream, flags: in.Flags, log: cfg.Logger, dirty: &blockset.Set{}, probe: cfg.Probe}
	if p.probe <= 0 {
		p.probe = DefaultProbe
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.info = nbd.ExportInfo{Size: int64(in.Size), ReadOnly: in.Flags&nbd.FlagReadOnly != 0,
		MinBlock: in.MinBlock, PreferredBlock: in.PreferredBlock, Description: "bootfleet root proxy"}
	if cfg.Overlay != nil {
		for _, e := range cfg.Overlay.Extents() {
			p.markDirty(int64(e.Start)<<cfg.OverlayShift, int64(e.Len)<<cfg.OverlayShift)
		}
	}
	if !cfg.Base || cfg.CacheBytes <= 0 {
		if cfg.Multicast != nil {
			return nil, errors.New("rootproxy: multicast needs the read cache and a base export")
		}
		return p, nil
	}
	var err error
	// Receivers sharing a Hub (bootfleet storm) share the content's bytes
	// too; see mcast.SharedSlab.
	var shared *mcast.SharedSlab
	if cfg.Multicast != nil && cfg.Multicast.Hub != nil {
		shared = cfg.Multicast.Hub.Slab(p.info.Size)
	}
	if p.cache, err = newChunkCache(p.info.Size, cfg.CacheBytes, shared); err != nil {
		return nil, err
	}
	p.spans = make(chan []byte, spanBuffers)
	for range spanBuffers {
		p.spans <- make([]byte, spanBytes)
	}
	p.zeroes = make([]byte, 64<<10)
	if cfg.Multicast != nil {
		mc := *cfg.Multicast
		mc.Cache, mc.Size = p.cache, p.info.Size
		if mc.Logger == nil {
			mc.Logger = p.log
		}
		if p.rcv, err = mcast.NewReceiver(mc); err != nil {
			return nil, err
		}
		if cfg.ReadAhead < 0 || cfg.ReadAhead > MaxReadAhead {
			return nil, fmt.Errorf("rootproxy: read-ahead of %d chunks, want 0 to %d", cfg.ReadAhead, MaxReadAhead)
		}
		p.ahead = newReadAhead(cfg.Order, cfg.ReadAhead, p.info.Size)
	}
	return p, nil
}

// CacheBytes is the size of the read cache; 0 for none.
func (p *Proxy) CacheBytes() int64 {
	if p.cache == nil {
		return 0
	}
	return p.cache.bytes()
}

// Run runs the multicast Receiver until ctx ends; without multicast it
// only waits.
func (p *Proxy) Run(ctx context.Context) error {
	if p.rcv == nil {
		<-ctx.Done()
		return nil
	}
	return p.rcv.Run(ctx)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	st := Stats{UnicastBytes: p.unicast.Load(), HitBytes: p.hits.Load(), MissBytes: p.misses.Load(),
		WrittenBytes: p.written.Load(), Fallbacks: p.fallbacks.Load(), Multicast: "off"}
	if p.rcv != nil {
		rs := p.rcv.Stats()
		st.MulticastBytes, st.Lost, st.Overflow, st.Repairs, st.GroupReadBuffer = rs.Bytes, rs.Lost, rs.Overflow, rs.Repairs, rs.ReadBuffer
		if p.ahead != nil {
			st.AheadChunks, st.AheadUsed = p.ahead.chunks.Load(), p.ahead.used.Load()
		}
		switch {
		case rs.Silent:
			st.Multicast = "silent"
		case rs.Lossy:
			st.Multicast = "lossy"
		default:
			st.Multicast = "on"
		}
	}
	return st
}

// Lookup gives the kernel the proxy under ExportName.
func (p *Proxy) Lookup(name string, _ net.Addr) (nbd.Export, error) {
	if name != ExportName {
		return nil, fmt.Errorf("export %q: the root proxy serves only %q: %w", name, ExportName, nbd.ErrUnknownExport)
	}
	return p, nil
}

// Info is the servers' export as the kernel sees it.
func (p *Proxy) Info() nbd.ExportInfo { return p.info }

// ReadNow answers reads the cache holds whole, on the request loop.
func (p *Proxy) ReadNow(b []byte, off int64, _ bool) (nbd.Span, bool) {
	if p.cache == nil || p.isDirty(off, int64(len(b))) {
		return nbd.Span{}, false
	}
	if _, err := p.cache.ReadAt(b, off); err != nil {
		return nbd.Span{}, false
	}
	p.hits.Add(uint64(len(b)))
	p.readFrom(uint32(off/chunkwire.ChunkSize), uint32((off+int64(len(b))-1)/chunkwire.ChunkSize))
	return nbd.Span{Bytes: b}, true
}

// ReadSpan answers the rest: blocks the machine wrote from the servers,
// the base from the cache, the group, or by unicast.
func (p *Proxy) ReadSpan(b []byte, off int64) (nbd.Span, error) {
	n := int64(len(b))
	if p.cache == nil {
		return p.direct(b, off)
	}
	first, last := uint32(off/chunkwire.ChunkSize), uint32((off+n-1)/chunkwire.ChunkSize)
	if p.isDirty(off, n) {
		// The server's copy is the machine's; the clean chunks around it
		// still fill the cache.
		p.written.Add(uint64(n))
		return p.fill(b, off, first, last)
	}
	if _, err := p.cache.ReadAt(b, off); err == nil {
		p.hits.Add(uint64(n))
		p.readFrom(first, last)
		return nbd.Span{Bytes: b}, nil
	}
	p.misses.Add(uint64(n))
	p.readFrom(first, last)
	if p.groupGone() {
		p.reprobe(first, last)
		return p.exact(b, off)
	}
	if p.fromGroup(first, last) {
		if _, err := p.cache.ReadAt(b, off); err == nil {
			return nbd.Span{Bytes: b}, nil
		}
	}
	if p.groupGone() {
		return p.exact(b, off)
	}
	return p.fill(b, off, first, last)
}

// groupGone says the group brings nothing (none, silent, lossy, or not
// heard from since a probe waited in vain): the machine then reads what it
// asks for and no more, as on the direct path, since rounding every read
// out to whole chunks only pays while the group fills the rest of them for
// others.
func (p *Proxy) groupGone() bool {
	if p.rcv == nil {
		return true
	}
	if p.probeLapsed.Load() && !p.rcv.Heard() {
		return true
	}
	st := p.rcv.Stats()
	return st.Silent || st.Lossy
}

// ReprobeEvery is how often a machine whose group is gone still asks it
// for a miss's chunks, so that a group which starts delivering (a querier
// appears, a firewall rule goes) is noticed. Asking for every miss would
// have the server multicast each of them into a network that drops them.
const ReprobeEvery = time.Second

// reprobe asks a gone group for chunks first..last, at most once per
// ReprobeEvery, without waiting for them.
func (p *Proxy) reprobe(first, last uint32) {
	if p.rcv == nil {
		return
	}
	now, prev := time.Now().UnixNano(), p.lastReprobe.Load()
	if now-prev < int64(ReprobeEvery) || !p.lastReprobe.CompareAndSwap(prev, now) {
		return
	}
	p.rcv.Want(first, last-first+1)
}

// exact reads b by unicast as it is and caches the chunks it holds whole.
func (p *Proxy) exact(b []byte, off int64) (nbd.Span, error) {
	if _, err := p.direct(b, off); err != nil {
		return nbd.Span{}, err
	}
	end := off + int64(len(b))
	for c := (off + chunkwire.ChunkSize - 1) / chunkwire.ChunkSize; ; c++ {
		c0 := c * chunkwire.ChunkSize
		c1 := min(c0+chunkwire.ChunkSize, p.info.Size)
		if c1 > end || c0 >= c1 {
			break
		}
		if !p.isDirty(c0, c1-c0) {
			p.cache.fill(uint32(c), b[c0-off:c1-off])
		}
	}
	return nbd.Span{Bytes: b}, nil
}

// fromGroup waits for chunks first..last from the group, asking for
// read-ahead beyond them; false means read them by unicast.
func (p *Proxy) fromGroup(first, last uint32) bool {
	p.rcv.Want(first, last-first+1)
	// Read-ahead waits until the group has delivered: on a network that
	// drops it, a probe's read-ahead would have the server multicast
	// megabytes nobody gets, on the CPU the unicast reads need.
	if p.ahead != nil && p.rcv.Heard() {
		p.aheadOf(first, last)
	}
	ctx := context.Background()
	if !p.rcv.Heard() {
		// The chunks stay asked for: once they arrive, the group has
		// proved itself and later misses wait on it.
		if p.probeLapsed.Load() {
			return false
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.probe)
		defer cancel()
	}
	for c := first; c <= last; c++ {
		if err := p.rcv.Wait(ctx, c); err != nil {
			p.fallbacks.Add(1)
			if ctx.Err() != nil && !p.probeLapsed.Swap(true) {
				p.log.Info("root proxy: nothing from the group yet: reading by unicast until it delivers", "waited", p.probe)
			}
			return false
		}
	}
	return true
}

// fill reads chunks first..last whole by unicast, caches those the
// machine has not written and copies out b.
func (p *Proxy) fill(b []byte, off int64, first, last uint32) (nbd.Span, error) {
	s0 := int64(first) * chunkwire.ChunkSize
	s1 := min(int64(last+1)*chunkwire.ChunkSize, p.info.Size)
	var span []byte
	select {
	case span = <-p.spans:
	default:
	}
	if span == nil || s1-s0 > int64(len(span)) {
		if span != nil {
			p.spans <- span
		}
		return p.direct(b, off)
	}
	defer func() { p.spans <- span }()
	if err := p.up.Do(nbd.Request{Type: nbd.CmdRead, Offset: uint64(s0), Length: uint32(s1 - s0)}, nil, span); err != nil {
		return nbd.Span{}, err
	}
	p.unicast.Add(uint64(s1 - s0))
	for c := first; c <= last; c++ {
		c0 := int64(c) * chunkwire.ChunkSize
		c1 := min(c0+chunkwire.ChunkSize, p.info.Size)
		if !p.isDirty(c0, c1-c0) {
			p.cache.fill(c, span[c0-s0:c1-s0])
		}
	}
	copy(b, span[off-s0:])
	return nbd.Span{Bytes: b}, nil
}

// direct reads b from the servers as it is.
func (p *Proxy) direct(b []byte, off int64) (nbd.Span, error) {
	if err := p.up.Do(nbd.Request{Type: nbd.CmdRead, Offset: uint64(off), Length: uint32(len(b))}, nil, b); err != nil {
		return nbd.Span{}, err
	}
	p.unicast.Add(uint64(len(b)))
	return nbd.Span{Bytes: b}, nil
}

// WriteNow never writes on the request loop: every write waits on a server.
func (p *Proxy) WriteNow([]byte, int64) bool { return false }

// WriteAt marks the blocks written before it sends them, so no read
// takes them from the cache from then on.
func (p *Proxy) WriteAt(b []byte, off int64) (int, error) {
	p.markDirty(off, int64(len(b)))
	if err := p.up.Do(nbd.Request{Type: nbd.CmdWrite, Offset: uint64(off), Length: uint32(len(b))}, b, nil); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush passes NBD_CMD_FLUSH on to the server.
func (p *Proxy) Flush() error {
	if p.flags&nbd.FlagSendFlush == 0 {
		return nil
	}
	return p.up.Do(nbd.Request{Type: nbd.CmdFlush}, nil, nil)
}

// Trim passes the trim on; trimmed blocks no longer read as the base.
func (p *Proxy) Trim(off, n int64) error {
	p.markDirty(off, n)
	if p.flags&nbd.FlagSendTrim == 0 {
		return nil
	}
	return p.up.Do(nbd.Request{Type: nbd.CmdTrim, Offset: uint64(off), Length: uint32(n)}, nil, nil)
}

// WriteZeroes passes the command on, or writes zeroes where the server
// does not take it.
func (p *Proxy) WriteZeroes(off, n int64, noHole bool) error {
	p.markDirty(off, n)
	if p.flags&nbd.FlagSendWriteZeroes != 0 {
		var fl nbd.CmdFlags
		if noHole {
			fl = nbd.CmdFlagNoHole
		}
		return p.up.Do(nbd.Request{Type: nbd.CmdWriteZeroes, Flags: fl, Offset: uint64(off), Length: uint32(n)}, nil, nil)
	}
	if p.zeroes == nil {
		p.zeroes = make([]byte, 64<<10)
	}
	for n > 0 {
		k := min(n, int64(len(p.zeroes)))
		if err := p.up.Do(nbd.Request{Type: nbd.CmdWrite, Offset: uint64(off), Length: uint32(k)}, p.zeroes[:k], nil); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// Close does nothing: the proxy outlives the kernel's session, which
// ends only at shutdown.
func (p *Proxy) Close() error { return nil }

func blocksOf(off, n int64) (uint64, uint64) {
	first := uint64(off) >> DirtyShift
	last := uint64(off+n-1) >> DirtyShift
	return first, last - first + 1
}

func (p *Proxy) isDirty(off, n int64) bool {
	if n <= 0 {
		return false
	}
	first, count := blocksOf(off, n)
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return p.dirty.Overlaps(first, count)
}

// markDirty records a write and drops the chunks it touches.
func (p *Proxy) markDirty(off, n int64) {
	if n <= 0 {
		return
	}
	first, count := blocksOf(off, n)
	p.dmu.Lock()
	p.dirty.AddRange(first, count)
	p.dmu.Unlock()
	if p.cache != nil {
		for c := uint32(off / chunkwire.ChunkSize); int64(c)*chunkwire.ChunkSize < off+n; c++ {
			p.cache.drop(c)
		}
	}
}
