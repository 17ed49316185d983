package mcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// Errors a Receiver's Wait returns; each means "read this by unicast".
var (
	// ErrSilent: nothing of the content arrived from the group within
	// Silence while chunks were wanted. The network drops the group (IGMP
	// snooping without a querier, a firewall) or the server is gone. The
	// Receiver stays silent: every later Wait returns it at once.
	ErrSilent = errors.New("mcast: nothing arrived from the group")
	// ErrLossy: the chunk was asked for again MaxRepairs times and is
	// still incomplete, or this machine lost more than MaxLoss of the
	// group's datagrams; then every later Wait returns it at once, and the
	// machine's repairs stop costing the others bandwidth.
	ErrLossy = errors.New("mcast: too much of the group lost")
	// ErrNoSlot: the cache has no slot to assemble the chunk in.
	ErrNoSlot = errors.New("mcast: no cache slot for the chunk")
)

// Cache is where a Receiver assembles chunks: MemCache, or a cache on a
// local disk. A buffer from Reserve is the Receiver's alone until it
// commits or releases the chunk.
type Cache interface {
	// Has reports whether chunk is committed.
	Has(chunk uint32) bool
	// Reserve returns a buffer of chunkwire.ChunkSize bytes to assemble
	// chunk in, the same until Commit or Release; false if there is none.
	Reserve(chunk uint32) ([]byte, bool)
	// Commit makes the chunk readable; its first n bytes are the content.
	Commit(chunk uint32, n int)
	// Release abandons an assembly.
	Release(chunk uint32)
}

// requestWriter is where a Receiver's requests go.
type requestWriter interface {
	WriteToUDPAddrPort(b []byte, to netip.AddrPort) (int, error)
}

// ReceiverConfig says what a Receiver receives and how patiently.
type ReceiverConfig struct {
	Server    netip.AddrPort      // the Sender's socket, where requests go
	Group     netip.AddrPort      // the content's group
	Interface *net.Interface      // where to join; nil: as routing says
	Content   chunkwire.ContentID // the content
	Size      int64               // its size in bytes
	Cache     Cache               // where chunks go; required
	ID        uint32              // receiver id in requests; 0: random
	Logger    *slog.Logger        // default: discarded
	// Silence is how long wanted chunks may wait with nothing arriving
	// from the group before every wait fails with ErrSilent. Default 2 s.
	Silence time.Duration
	// RepairAfter is how long a wanted chunk may make no progress before
	// its missing fragments are asked for again. Default 50 ms; above the
	// Sender's Suppress.
	RepairAfter time.Duration
	// AskAgain is how long a wanted chunk of which nothing arrived waits,
	// while the server sends other chunks, before it is asked for again:
	// the server may be sending a long queue, or may have lost the request.
	// Default 1 s.
	AskAgain time.Duration
	// MaxRepairs is how many times a chunk is asked for again before its
	// waits fail with ErrLossy. Default 8.
	MaxRepairs int
	// KeepPartial is how long a chunk other agents asked for is kept
	// while fragments of it are missing here, so that wanting it later
	// asks only for what this machine lost rather than the whole chunk
	// again. Default 30 s; MaxPending bounds what it holds.
	KeepPartial time.Duration
	// MaxPending bounds the chunks being assembled at once. Default 512.
	MaxPending int
	// Hub, when set, is the group's socket, shared with the other
	// Receivers of this process (bootfleet storm); nil: a socket of its own.
	Hub *Hub
	// MaxLoss is the share of the group's datagrams this machine may lose,
	// judged over every 512, before it gives the group up with ErrLossy.
	// Default 0.2; 0 < MaxLoss <= 1.
	MaxLoss float64
}

// ReceiverStats counts what a Receiver has done. Unicast bytes are the
// caller's to count: they are the reads it made after a failed Wait.
type ReceiverStats struct {
	Datagrams  uint64 // data datagrams of the content taken
	Bytes      uint64 // their payload bytes: what came by multicast
	Duplicates uint64 // datagrams of fragments already held
	Lost       uint64 // datagrams missing from the sequence numbers
	// Overflow is the datagrams of the group this machine's socket
	// dropped, its receive buffer full: lost because this machine did not
	// read in time, not on the network. They count in Lost too.
	Overflow  uint64
	Requests  uint64 // requests sent, repairs included
	Repairs   uint64 // requests for lost fragments (FlagRepair) sent
	Chunks    uint64 // chunks committed to the cache
	Fallbacks uint64 // waits that failed: reads left to unicast
	// AheadChunks is the chunks asked for as read-ahead (WantAhead).
	AheadChunks uint64
	ReadBuffer  int  // bytes of the group socket's receive buffer, as the kernel granted
	Announced   bool // the server answered the hello
	Silent      bool // the group was given up with ErrSilent
	Lossy       bool // the group was given up with ErrLossy
}

// stallTicks is how many tick periods without a tick count as a stall of
// this process rather than a late timer.
const stallTicks = 8

// Receiver joins a content's group and assembles the chunks it asks for,
// and those other agents asked for, into its Cache.
type Receiver struct {
	cfg   ReceiverConfig
	log   *slog.Logger
	group *net.UDPConn  // the group's datagrams
	uc    *net.UDPConn  // requests out, announces in
	out   requestWriter // uc, or a test's stand-in

	mu        sync.Mutex
	pend      map[uint32]*assembly
	lastHeard time.Time
	// lastArrival is when the newest datagram read from the group
	// arrived: everything that arrived before it has been read.
	lastArrival time.Time
	// deferred counts wanted chunks not asked for yet because datagrams
	// waited unread when they were wanted; oldestDeferred is the first
	// such want.
	deferred       int
	oldestDeferred time.Time
	lastTick       time.Time  // when tick last ran
	resumed        time.Time  // the last tick that came after a stall
	queued         func() int // bytes waiting unread in the group's socket
	streams        [maxStreams]stream
	winTaken       uint32 // datagrams taken in the loss window
	winLost        uint32 // datagrams lost in the loss window
	dropped        uint32 // the socket's drop count at the last datagram
	gaveUp         error  // ErrSilent or ErrLossy once the group is given up
	st             ReceiverStats
	reqBuf         []byte
	repairList     []chunkwire.Range
	aheadRanges    []chunkwire.Range // WantAhead's, reused
	free           []*assembly       // assemblies to reuse (pool.go)
	waitChans      []chan error      // Wait's channels to reuse
}

// assembly is a chunk being received.
type assembly struct {
	buf      []byte
	have     uint32 // fragments held
	need     uint32 // fragments the chunk has
	wanted   bool   // asked for by this receiver: repaired, waited on
	since    time.Time
	asked    time.Time // last request for it
	progress time.Time // last fragment
	repairs  int
	deferred bool         // wanted while datagrams waited unread: not asked for yet
	slab     *SharedSlab  // buf's SharedSlab (Hub.onSlab); nil: buf is this cache's own
	waiters  []chan error // each Wait on the chunk, told how it ended
}

// NewReceiver checks cfg, joins the group and opens the request socket.
// Run it, then Want and Wait; Close when done.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	r, err := newReceiver(cfg)
	if err != nil {
		return nil, err
	}
	if h := cfg.Hub; h != nil {
		r.st.ReadBuffer = h.got
		r.queued = func() int { return unreadBytes(h.conn) }
	} else {
		if r.group, r.st.ReadBuffer, err = listenGroup(cfg.Group, cfg.Interface); err != nil {
			return nil, err
		}
		r.queued = func() int { return unreadBytes(r.group) }
	}
	if r.uc, err = net.ListenUDP("udp4", nil); err != nil {
		r.Close()
		return nil, fmt.Errorf("mcast: open request socket: %w", err)
	}
	r.out = r.uc
	return r, nil
}

// newReceiver checks cfg and fills its defaults; the sockets are the
// caller's to open.
func newReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Cache == nil || cfg.Size < 0 || !cfg.Server.IsValid() {
		return nil, fmt.Errorf("mcast: receiver for %v: cache %v, size %d, server %v: want a cache, a size and a server", cfg.Content, cfg.Cache, cfg.Size, cfg.Server)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Silence, 2*time.Second)
	def(&cfg.RepairAfter, 50*time.Millisecond)
	def(&cfg.AskAgain, time.Second)
	def(&cfg.KeepPartial, 30*time.Second)
	if cfg.MaxRepairs == 0 {
		cfg.MaxRepairs = 8
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = 512
	}
	if cfg.MaxLoss == 0 {
		cfg.MaxLoss = 0.2
	}
	if cfg.MaxLoss < 0 || cfg.MaxLoss > 1 {
		return nil, fmt.Errorf("mcast: receiver max loss %v, want more than 0 and at most 1", cfg.MaxLoss)
	}
	if cfg.RepairAfter < time.Millisecond || cfg.Silence < cfg.RepairAfter || cfg.AskAgain < cfg.RepairAfter || cfg.KeepPartial < cfg.RepairAfter {
		return nil, fmt.Errorf("mcast: receiver repair after %v, ask again %v, silence %v, keep partial %v: want at least 1ms, and the others no shorter", cfg.RepairAfter, cfg.AskAgain, cfg.Silence, cfg.KeepPartial)
	}
	if cfg.ID == 0 {
		cfg.ID = rand.Uint32() | 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{cfg: cfg, log: log, pend: make(map[uint32]*assembly, cfg.MaxPending), queued: func() int { return 0 }}
	r.preallocate()
	return r, nil
}

// Close leaves the group and closes the sockets; Run returns.
func (r *Receiver) Close() error {
	var errs []error
	if r.cfg.Hub != nil {
		r.cfg.Hub.remove(r)
	} else if r.group != nil {
		errs = append(errs, r.group.Close())
	}
	if r.uc != nil {
		errs = append(errs, r.uc.Close())
	}
	return errors.Join(errs...)
}

// Heard reports whether a datagram of the content has arrived from the
// group: until then, the network may be dropping it.
func (r *Receiver) Heard() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.lastHeard.IsZero()
}

// Stats returns the counters.
func (r *Receiver) Stats() ReceiverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Run says hello to the server, reads the group and the server's
// answers, and repairs, until ctx ends or Close; it closes the Receiver
// when it returns.
func (r *Receiver) Run(ctx context.Context) error {
	defer r.Close()
	r.mu.Lock()
	r.send(0, nil)
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	if r.cfg.Hub != nil {
		r.cfg.Hub.add(r)
		wg.Done()
	} else {
		go func() { defer wg.Done(); r.readGroup() }()
	}
	go func() { defer wg.Done(); r.readServer() }()
	t := time.NewTicker(r.cfg.RepairAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Close()
			wg.Wait()
			return nil
		case now := <-t.C:
			r.tick(now)
		}
	}
}

func (r *Receiver) readServer() {
	buf := make([]byte, 2048)
	for {
		n, _, err := r.uc.ReadFrom(buf)
		if err != nil {
			return
		}
		if a, err := chunkwire.ParseAnnounce(buf[:n]); err == nil && a.Content == r.cfg.Content {
			r.mu.Lock()
			r.st.Announced = true
			r.mu.Unlock()
		}
	}
}

func (r *Receiver) readGroup() {
	buf := make([]byte, 2048)
	oob := make([]byte, stampSpace)
	for {
		n, got, err := readStamped(r.group, buf, oob)
		if err != nil {
			return
		}
		r.datagram(buf[:n], got)
	}
}

// datagram takes one datagram from the group's socket, which arrived as
// got says.
func (r *Receiver) datagram(b []byte, got arrival) {
	d, err := chunkwire.ParseData(b)
	r.handle(d, err == nil, got)
}

// handle takes one datagram from the group, parsed into d (ok: a sound
// Data, its checksum right), which arrived as got says: anyone on the
// segment can send one, so what is not a sound Data of this content is
// dropped. A Hub parses each datagram once and hands it to every
// Receiver here; d.Payload is valid only until handle returns.
func (r *Receiver) handle(d chunkwire.Data, ok bool, got arrival) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handleLocked(d, ok, got)
}

// handleBatch handles the datagrams of a Hub's batch, in order, under one
// hold of r.mu.
func (r *Receiver) handleBatch(batch []parsed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handleBatchLocked(batch)
}

// tryHandleBatch is handleBatch if r.mu is free; false, and nothing
// handled, if it is not.
func (r *Receiver) tryHandleBatch(batch []parsed) bool {
	if !r.mu.TryLock() {
		return false
	}
	defer r.mu.Unlock()
	r.handleBatchLocked(batch)
	return true
}

// handleBatchLocked is handleBatch with r.mu held.
func (r *Receiver) handleBatchLocked(batch []parsed) {
	for i := range batch {
		r.handleLocked(batch[i].d, batch[i].ok, batch[i].got)
	}
}

// handleLocked is handle with r.mu held.
func (r *Receiver) handleLocked(d chunkwire.Data, ok bool, got arrival) {
	arrived := got.at
	if arrived.After(r.lastArrival) {
		r.lastArrival = arrived
	}
	// The socket's count only grows, modulo 1<<32, and its datagrams are
	// read in the order queued: what it grew by since the last datagram
	// is what the socket dropped between them.
	r.st.Overflow += uint64(got.dropped - r.dropped)
	r.dropped = got.dropped
	if ok && d.Content == r.cfg.Content {
		r.take(d, arrived)
	}
	// The socket is read in order: everything that arrived before this
	// datagram has been read, so what was wanted before it may be asked.
	r.askDeferred(arrived, arrived)
}

// send sends a request with ranges (a hello when there are none) and
// counts it. r.mu is held.
func (r *Receiver) send(flags uint16, ranges []chunkwire.Range) {
	for first := true; first || len(ranges) > 0; first = false {
		n := min(len(ranges), chunkwire.MaxRanges)
		req := chunkwire.Request{Content: r.cfg.Content, Receiver: r.cfg.ID, Flags: flags, Ranges: ranges[:n]}
		ranges = ranges[n:]
		r.reqBuf = req.Append(r.reqBuf[:0])
		if _, err := r.out.WriteToUDPAddrPort(r.reqBuf, r.cfg.Server); err != nil {
			r.log.Debug("multicast: request to the server failed", "server", r.cfg.Server, "err", err)
		}
		if len(req.Ranges) > 0 {
			r.st.Requests++
			if flags&chunkwire.FlagRepair != 0 {
				r.st.Repairs++
			}
		}
	}
}
