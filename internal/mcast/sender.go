package mcast

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// SenderConfig tunes a Sender.
type SenderConfig struct {
	// Rate is the most the Sender sends, in bytes per second on the wire
	// (WireOverhead counted): the share of the server's link a storm may
	// take. Required; at least 64 KiB/s.
	Rate int64
	// Burst is how many bytes may leave back to back after a pause.
	// Default Burst(Rate, a data datagram); at least one datagram.
	Burst int64
	// Suppress is how long after a chunk's pass a request for the same
	// fragments is taken to have crossed them and is dropped. Default
	// 20 ms; 0 to 1 s. Keep it below the receivers' RepairAfter.
	Suppress time.Duration
	// MaxChunksPerRequest bounds the chunks one request may queue, so one
	// agent cannot fill the queue with the whole image. Default 1024
	// (32 MiB).
	MaxChunksPerRequest int
	// Logger gets the errors of sending. Default: discarded.
	Logger *slog.Logger
	// OnRead, if set, gets the chunks of every request that is neither a
	// repair nor read-ahead, in the order asked: what agents read, from
	// which the server learns a content's read order. It runs on the
	// request loop with the Sender's lock held, so it must be quick.
	OnRead func(id chunkwire.ContentID, first, last uint32)
}

// Content is what a Sender multicasts for one image.
type Content struct {
	ID    chunkwire.ContentID
	Group netip.AddrPort // where its chunks go
	Size  int64          // bytes; Data must hold them all
	Data  io.ReaderAt
}

// SenderStats counts what a Sender has done since it started.
type SenderStats struct {
	Requests   uint64 // requests with ranges, repairs included
	Repairs    uint64 // requests with FlagRepair
	ReadAhead  uint64 // requests with FlagReadAhead
	Hellos     uint64 // requests without ranges, answered by an Announce
	Unknown    uint64 // requests for a content the Sender does not serve, or malformed
	Merged     uint64 // chunks asked for while already queued
	Suppressed uint64 // chunks asked for while their datagrams were in flight
	Chunks     uint64 // passes over a chunk
	Datagrams  uint64 // data datagrams sent
	Bytes      uint64 // UDP payload bytes of the data datagrams
	Again      uint64 // of those, bytes of chunks passed over before: repairs and late askers
	SendErrors uint64 // data datagrams the socket refused
}

// served is a content with what has been sent of it.
type served struct {
	Content
	chunks, datagrams, bytes, again atomic.Uint64
	passed                          []uint64 // a bit per chunk passed over; the send loop's alone
}

// firstPass records a pass over chunk and reports whether it is the
// first: what a storm costs beyond sending each chunk once.
func (c *served) firstPass(chunk uint32) bool {
	if c.passed == nil {
		c.passed = make([]uint64, (chunkwire.Chunks(c.Size)+63)/64)
	}
	w, bit := chunk/64, uint64(1)<<(chunk%64)
	first := c.passed[w]&bit == 0
	c.passed[w] |= bit
	return first
}

// ContentStats counts what a Sender has multicast of one content: the
// figure to set beside what one machine's boot reads of it.
type ContentStats struct {
	Chunks    uint64 // passes over a chunk
	Datagrams uint64 // data datagrams sent
	Bytes     uint64 // their UDP payload bytes
	Again     uint64 // of those, bytes of chunks passed over before
}

// ContentStats returns the counters of content id since it was added;
// false if it is not served.
func (s *Sender) ContentStats(id chunkwire.ContentID) (ContentStats, bool) {
	s.mu.Lock()
	c, ok := s.contents[id]
	s.mu.Unlock()
	if !ok {
		return ContentStats{}, false
	}
	return ContentStats{Chunks: c.chunks.Load(), Datagrams: c.datagrams.Load(), Bytes: c.bytes.Load(), Again: c.again.Load()}, true
}

// Sender serves Requests on one socket and multicasts the chunks asked
// for. Create it with NewSender, add contents, then Run it.
type Sender struct {
	conn net.PacketConn
	cfg  SenderConfig
	log  *slog.Logger

	mu       sync.Mutex
	contents map[chunkwire.ContentID]*served
	q        *queue
	wake     chan struct{} // a job was queued
	id       uint32        // sender id in every datagram, random per Sender
	seq      uint32        // next sequence number, owned by the send loop
	nextSeq  atomic.Uint32 // seq as the request loop may read it

	requests, repairs, aheads, hellos, unknown, merged, suppressed atomic.Uint64
	chunks, datagrams, bytes, again, sendErrors                    atomic.Uint64
}

// NewSender checks cfg and returns a Sender on conn, which it reads
// requests from and writes data to (ListenSender opens one). The caller
// keeps conn and closes it after Run returns.
func NewSender(conn net.PacketConn, cfg SenderConfig) (*Sender, error) {
	if cfg.Rate < 64<<10 {
		return nil, fmt.Errorf("mcast: sender rate %d bytes/s, want at least %d", cfg.Rate, 64<<10)
	}
	if cfg.Burst == 0 {
		cfg.Burst = Burst(cfg.Rate, chunkwire.MaxDataLen+WireOverhead)
	}
	if cfg.Burst < chunkwire.MaxDataLen+WireOverhead {
		return nil, fmt.Errorf("mcast: sender burst %d bytes, want at least one datagram (%d)", cfg.Burst, chunkwire.MaxDataLen+WireOverhead)
	}
	if cfg.Suppress == 0 {
		cfg.Suppress = 20 * time.Millisecond
	}
	if cfg.Suppress < 0 || cfg.Suppress > time.Second {
		return nil, fmt.Errorf("mcast: sender suppress %v, want 0 to 1s", cfg.Suppress)
	}
	if cfg.MaxChunksPerRequest == 0 {
		cfg.MaxChunksPerRequest = 1024
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sender{conn: conn, cfg: cfg, log: log, id: rand.Uint32() | 1, contents: map[chunkwire.ContentID]*served{}, q: newQueue(), wake: make(chan struct{}, 1)}, nil
}

// Add serves c from now on. A content already served is replaced.
func (s *Sender) Add(c Content) error {
	if !c.Group.Addr().IsMulticast() || c.Group.Port() == 0 {
		return fmt.Errorf("mcast: content %v: group %v, want a multicast address and port", c.ID, c.Group)
	}
	if c.Size < 0 || c.Data == nil {
		return fmt.Errorf("mcast: content %v: size %d and data %v, want a size and a reader", c.ID, c.Size, c.Data)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contents[c.ID] = &served{Content: c}
	return nil
}

// Remove stops serving id and drops what was queued for it.
func (s *Sender) Remove(id chunkwire.ContentID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.contents, id)
	s.q.drop(id)
}

// Stats returns the counters.
func (s *Sender) Stats() SenderStats {
	return SenderStats{
		Requests: s.requests.Load(), Repairs: s.repairs.Load(), ReadAhead: s.aheads.Load(), Hellos: s.hellos.Load(),
		Unknown: s.unknown.Load(), Merged: s.merged.Load(), Suppressed: s.suppressed.Load(),
		Chunks: s.chunks.Load(), Datagrams: s.datagrams.Load(), Bytes: s.bytes.Load(), Again: s.again.Load(),
		SendErrors: s.sendErrors.Load(),
	}
}

// Run reads requests and sends what they ask for until ctx ends, then
// returns nil; or returns the first error reading the socket. Run once:
// it leaves the socket's read deadline passed.
func (s *Sender) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- s.readRequests()
		cancel()
	}()
	sendErr := s.sendLoop(ctx)
	// Unblock the reader; the deadline is the way a net.PacketConn offers.
	s.conn.SetReadDeadline(time.Now())
	err := <-recvErr
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || isTimeout(err)) {
		err = nil
	}
	return errors.Join(err, sendErr)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Sender) readRequests() error {
	buf := make([]byte, 2048)
	ranges := make([]chunkwire.Range, 0, chunkwire.MaxRanges)
	var reply []byte
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("mcast: read requests: %w", err)
		}
		req, err := chunkwire.ParseRequest(buf[:n], ranges)
		if err != nil {
			s.unknown.Add(1)
			continue
		}
		if a, ok := s.handle(req); ok {
			s.hellos.Add(1)
			reply = a.Append(reply[:0])
			if _, err := s.conn.WriteTo(reply, from); err != nil {
				s.log.Warn("multicast: announce to an agent failed", "agent", from, "err", err)
			}
		}
	}
}

// handle queues what req asks for; for a hello it returns the Announce to
// send back.
func (s *Sender) handle(req chunkwire.Request) (chunkwire.Announce, bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contents[req.Content]
	if !ok {
		s.unknown.Add(1)
		return chunkwire.Announce{}, false
	}
	if len(req.Ranges) == 0 {
		return chunkwire.Announce{Content: c.ID, Size: c.Size, Sender: s.id, NextSeq: s.nextSeq.Load(), Group: c.Group}, true
	}
	s.requests.Add(1)
	repair := req.Flags&chunkwire.FlagRepair != 0
	ahead := req.Flags&chunkwire.FlagReadAhead != 0
	switch {
	case repair:
		s.repairs.Add(1)
	case ahead:
		s.aheads.Add(1)
	}
	budget := s.cfg.MaxChunksPerRequest
	total := chunkwire.Chunks(c.Size)
	queued := false
	for _, g := range req.Ranges {
		if !repair && !ahead && s.cfg.OnRead != nil && g.First < total && budget > 0 {
			s.cfg.OnRead(c.ID, g.First, min(g.Last(), total-1, g.First+uint32(budget)-1))
		}
		for i := uint32(0); i < g.Count && g.First+i < total && budget > 0; i++ {
			budget--
			chunk := g.First + i
			mask := g.Mask & fragmentsMask(chunk, c.Size)
			added, merged := s.q.add(chunkKey{c.ID, chunk}, mask, repair, ahead, now, s.cfg.Suppress)
			switch {
			case merged:
				s.merged.Add(1)
			case !added && mask != 0:
				s.suppressed.Add(1)
			}
			queued = queued || added
		}
	}
	if queued {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return chunkwire.Announce{}, false
}

// fragmentsMask has a bit for each fragment chunk has in content of size.
func fragmentsMask(chunk uint32, size int64) uint32 {
	n := chunkwire.FragmentsOf(chunk, size)
	return uint32(1<<n - 1)
}

// sendLoop sends queued jobs until ctx ends.
func (s *Sender) sendLoop(ctx context.Context) error {
	p := NewPacer(s.cfg.Rate, s.cfg.Burst)
	chunk := make([]byte, chunkwire.ChunkSize)
	b := NewBatch(s.conn, min(chunkwire.FragmentsPerChunk, int(s.cfg.Burst/(chunkwire.MaxDataLen+WireOverhead))), chunkwire.MaxDataLen)
	for {
		s.mu.Lock()
		j, ok := s.q.next(time.Now(), s.cfg.Suppress)
		c := s.contents[j.key.content]
		s.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				continue
			}
		}
		if c == nil {
			continue
		}
		if err := s.sendChunk(ctx, p, c, j, chunk, b); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// sendChunk reads j's chunk and multicasts the fragments j asks for, up
// to a burst of them per system call: at a storm's rate, a wake-up and a
// syscall per datagram were most of the server's CPU.
func (s *Sender) sendChunk(ctx context.Context, p *Pacer, c *served, j job, chunk []byte, b *Batch) error {
	off := int64(j.key.chunk) * chunkwire.ChunkSize
	n := int(min(chunkwire.ChunkSize, c.Size-off))
	// io.ReaderAt may say EOF with a full read at the end of the content.
	if k, err := c.Data.ReadAt(chunk[:n], off); k < n {
		return fmt.Errorf("mcast: read chunk %d of content %v: %d of %d bytes: %w", j.key.chunk, c.ID, k, n, err)
	}
	s.chunks.Add(1)
	c.chunks.Add(1)
	again := !c.firstPass(j.key.chunk)
	to := net.UDPAddrFromAddrPort(c.Group)
	for f := 0; f < chunkwire.FragmentsPerChunk; f++ {
		if j.mask&(1<<f) == 0 {
			continue
		}
		d := chunkwire.Data{Content: c.ID, Sender: s.id, Seq: s.seq + uint32(b.Len()), Chunk: j.key.chunk, Fragment: uint8(f)}
		last := j.mask>>(f+1) == 0
		if last {
			d.Flags = chunkwire.FlagEnd
		}
		start := f * chunkwire.FragmentSize
		d.Payload = chunk[start:min(n, start+chunkwire.FragmentSize)]
		b.Push(d.Append(b.Next()))
		if !last && !b.Full() {
			continue
		}
		if err := p.Wait(ctx, b.WireBytes()); err != nil {
			return err
		}
		s.seq += uint32(b.Len())
		s.nextSeq.Store(s.seq)
		b.Send(to, func(sent int, bytes uint64, err error) {
			if err != nil {
				// A full socket buffer or a route that went away loses
				// this datagram like the network would; the agents ask
				// again. The log gets the 1st, 2nd, 4th, 8th... failure,
				// not a line per datagram at line rate.
				if n := s.sendErrors.Add(1); n&(n-1) == 0 {
					s.log.Warn("multicast: send failed", "group", c.Group, "chunk", j.key.chunk, "failures", n, "err", err)
				}
				return
			}
			s.datagrams.Add(uint64(sent))
			s.bytes.Add(bytes)
			c.datagrams.Add(uint64(sent))
			c.bytes.Add(bytes)
			if again {
				s.again.Add(bytes)
				c.again.Add(bytes)
			}
		})
	}
	return nil
}
