package tftp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// transferConn is a UDP socket connected to one client: the kernel drops
// datagrams from any other address, which is the transfer-ID check of RFC
// 1350 section 4.
type transferConn interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
	SetReadDeadline(t time.Time) error
}

// Batches bound the memory of one transfer: a window larger than a batch
// is sent as several batches. A batch holds at most maxBatchPackets packets
// and maxBatchBytes of payload, so a transfer's send state stays under
// about 300 KiB whatever blksize*windowsize is: the payload buffer (only for
// files not in the cache, whose blocks are sent straight from the cached
// bytes) plus about 150 bytes of headers, iovecs and message headers per
// packet.
const (
	maxBatchBytes   = 256 << 10
	maxBatchPackets = 256
)

// batchPackets is how many packets one batch of a transfer holds.
func batchPackets(blk, window int) int {
	return max(1, min(window, maxBatchPackets, maxBatchBytes/(blk+4)))
}

// dataPacket is one DATA datagram in two pieces, so that the payload can
// point into cached file contents without a copy.
type dataPacket struct {
	hdr     [4]byte
	payload []byte
}

func (p *dataPacket) size() int { return len(p.hdr) + len(p.payload) }

// dataWriter sends a batch of DATA packets on the transfer's socket, in
// order. Write errors that only mean "dropped locally" (isTransient) are
// not returned: the retransmission timer handles them like any loss.
type dataWriter interface {
	writeData(pkts []dataPacket) error
}

// lockstepIO is a transfer socket that also sends DATA itself, and that
// another goroutine can shut down.
type lockstepIO interface {
	transferConn
	dataWriter
	shutdown()
	Close() error
}

// errGiveUp marks a transfer abandoned after too many timeouts.
var errGiveUp = errors.New("no acknowledgement from client")

// clientError is an ERROR packet received from the client.
type clientError struct{ pkt *Error }

func (e clientError) Error() string {
	return fmt.Sprintf("client aborted with error %d: %q", e.pkt.Code, e.pkt.Message)
}

// sender sends one file with RFC 7440 windows and go-back-N recovery.
//
// Blocks are counted with 64-bit indices (1 = first block); the wire carries
// the low 16 bits, so block numbers roll over from 65535 to 0. An ACK is
// mapped back to the unique index in [acked, lastSent] with the same low 16
// bits; windows are at most 65535 blocks, so the mapping is unambiguous.
//
// Recovery, and why it cannot become Sorcerer's Apprentice:
//
//   - After sending a window the sender waits for an ACK that moves acked
//     forward. Such an ACK, whether for the window's last block or an earlier
//     one (a receiver that saw a gap ACKs its last in-order block, RFC 7440
//     section 4), makes the next window start right after it: go-back-N.
//   - An ACK that does not move acked forward (a duplicate, or a stale one
//     from before a retransmission) is ignored and does not reset the timer.
//     So every ACK can trigger at most one window; duplicates from a client
//     that re-ACKs each duplicate DATA it receives cannot multiply traffic.
//   - Only a timeout retransmits without new information, from acked+1.
//     The first fastTimeouts consecutive timeouts use the adaptive RTO,
//     doubled each time: that recovers a lost DATA, or a lost ACK, quickly.
//     Later ones wait clientWait, longer than common client timeouts (5s),
//     because of how atftp 0.8 answers blocks it did not expect: it
//     re-ACKs its last in-order block for the first unexpected block
//     (duplicate or gap) after in-order progress, ignores every further one
//     until an in-order block arrives, and restarts its own timer on every
//     packet, ignored or not. When that one repeated ACK is lost too, only
//     server silence lets its timer fire and repeat the ACK. (A tail probe,
//     resending only the window's last block on the first timeout, was
//     measured here and made loss recovery with atftp slower: it spends a
//     fast timeout on a packet atftp ignores after a lost gap ACK.)
//   - Give up after more than retries consecutive timeouts in which the
//     client said nothing: a client that repeats its last ACK is still
//     waiting, and on a link whose queue drops most of the window (a
//     FIFO full of other machines' TCP) the server gave up on it while
//     it would have gone on asking (OVMF: 6 tries, 4 s apart).
type sender struct {
	conn     transferConn
	out      dataWriter
	pollConn transferConn // conn as first given, for kick; never reassigned
	// promote, if set, is called once the first block is acknowledged, in
	// a lockstep transfer, and may return a socket to carry on with (see
	// blockingConn); the kick of a repeated RRQ is no longer needed then.
	promote func() lockstepIO
	file    io.ReaderAt
	mem     []byte // the whole file, when it is in memory; else nil
	// loading, when file is still being loaded into memory, offers the
	// contents once loaded; then mem takes over.
	loading    interface{ memory() []byte }
	size       int64
	blk        int
	window     int
	rtt        *rttEstimator
	retries    int
	clientWait time.Duration

	total       uint64 // blocks in the file; the last is short, maybe empty
	acked       uint64 // highest block the client confirmed (contiguous)
	highestSent uint64
	retransmits int
	kicked      atomic.Bool

	buf  []byte // payloads read from a file not in memory
	pkts []dataPacket
	rbuf []byte
	ack  Ack // the last ACK read, reused: one allocation less per block
}

// fastTimeouts is how many consecutive timeouts use the adaptive RTO
// before the sender falls back to waiting clientWait.
const fastTimeouts = 2

// newSender prepares to send file. out must accept batches of
// batchPackets(blk, window) packets.
func newSender(conn transferConn, out dataWriter, file io.ReaderAt, size int64, blk, window, retries int, clientWait time.Duration, rtt *rttEstimator) *sender {
	s := &sender{
		conn: conn, pollConn: conn, out: out, file: file, size: size, blk: blk, window: window,
		rtt: rtt, retries: retries, clientWait: clientWait,
		total: uint64(size)/uint64(blk) + 1,
		rbuf:  make([]byte, 1024),
	}
	batch := batchPackets(blk, window)
	s.pkts = make([]dataPacket, batch)
	if m, ok := file.(*memFile); ok && int64(len(m.data)) == size {
		s.mem = m.data
	} else {
		s.buf = make([]byte, batch*blk)
		s.loading, _ = file.(interface{ memory() []byte })
	}
	return s
}

// oackBackstop is how long the server waits, without word from the client,
// before it resends an OACK on its own.
func oackBackstop(initial time.Duration) time.Duration {
	return max(2*initial, minClientWait)
}

// minClientWait exceeds the 5s default timeout of tftp-hpa and atftp
// clients. A variable so tests can shorten it.
var minClientWait = 6 * time.Second

// handshake sends the OACK and waits for ACK 0 (RFC 2347).
//
// Here the client drives retransmission: the OACK is resent at once when
// the client repeats its RRQ (so the OACK was lost; see kick), and on the
// server's own timer only after oackBackstop, longer than common client
// timeouts (5s). A quicker timer meets a real client bug: atftp aborts when
// a second OACK arrives after it sent ACK 0, which is exactly what happens
// when only its ACK 0 was lost; it repeats the ACK itself after its timeout.
func (s *sender) handshake(oack []byte, backstop time.Duration) error {
	start := time.Now()
	sends := 0
	send := func() error {
		if sends > 0 {
			s.retransmits++
		}
		sends++
		if _, err := s.conn.Write(oack); err != nil && !isTransient(err) {
			return fmt.Errorf("sending OACK: %w", err)
		}
		return nil
	}
	if err := send(); err != nil {
		return err
	}
	deadline := start.Add(backstop)
	for {
		p, err := s.read(deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if s.kicked.Swap(false) {
				if err := send(); err != nil {
					return err
				}
				continue
			}
			if time.Since(start) >= 2*backstop {
				return fmt.Errorf("%w: no ACK 0 for the OACK after %d sends in %v", errGiveUp, sends, time.Since(start).Round(time.Millisecond))
			}
			if err := send(); err != nil {
				return err
			}
			deadline = time.Now().Add(backstop)
			continue
		}
		if err != nil {
			return err
		}
		if a, ok := p.(*Ack); ok && a.Block == 0 {
			if sends == 1 {
				s.rtt.sample(time.Since(start))
			}
			return nil
		}
	}
}

// kick tells the transfer that its client repeated the RRQ: the OACK or
// DATA 1 was lost. It is safe to call from another goroutine.
func (s *sender) kick() {
	s.kicked.Store(true)
	s.pollConn.SetReadDeadline(time.Unix(1, 0))
}

// run sends every block and returns when the last one is acknowledged.
func (s *sender) run() error {
	timeouts := 0 // since the last progress: they back the timer off
	silent := 0   // since the client last sent anything: they give up
	progress := time.Now()
	for s.acked < s.total {
		wait := s.rtt.timeout()
		if timeouts >= fastTimeouts {
			wait = max(wait, s.clientWait)
		}
		from := s.acked + 1
		end := min(s.acked+uint64(s.window), s.total)
		resent := s.highestSent >= from
		if resent {
			s.retransmits += int(min(end, s.highestSent) - from + 1)
		}
		if err := s.sendBlocks(from, end); err != nil {
			return err
		}
		s.highestSent = max(s.highestSent, end)
		sentAt := time.Now()
		deadline := sentAt.Add(wait)
		for {
			p, err := s.read(deadline)
			if errors.Is(err, os.ErrDeadlineExceeded) && s.kicked.Swap(false) {
				if s.acked > 0 {
					continue // a late duplicate RRQ; the transfer is under way
				}
				break // DATA 1 was lost: resend it now, without backoff
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				timeouts++
				if silent++; silent > s.retries {
					return fmt.Errorf("%w: block %d unacknowledged after %d retransmissions in %v", errGiveUp, from, timeouts-1, time.Since(progress).Round(time.Millisecond))
				}
				s.rtt.backoff()
				break
			}
			if err != nil {
				return err
			}
			a, ok := p.(*Ack)
			if !ok {
				continue
			}
			n := s.acked + uint64(a.Block-uint16(s.acked))
			// Beyond this window but not beyond what was ever sent: the
			// client has it from before a go-back-N, or, in a multicast
			// session, from when it only listened.
			if n == s.acked {
				silent = 0 // still waiting for from: alive, but no cause to resend
			}
			if n <= s.acked || n > s.highestSent {
				continue // duplicate or stale: see the type comment
			}
			if n == end && !resent {
				s.rtt.sample(time.Since(sentAt))
			}
			s.acked = n
			timeouts, silent = 0, 0
			progress = time.Now()
			if s.promote != nil {
				if c := s.promote(); c != nil {
					s.conn, s.out = c, c
				}
				s.promote = nil
			}
			break
		}
	}
	return nil
}

// read waits for the next decodable packet until deadline. An ERROR from the
// client ends the transfer; undecodable datagrams are skipped.
func (s *sender) read(deadline time.Time) (Packet, error) {
	if err := s.conn.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	if s.kicked.Load() {
		return nil, os.ErrDeadlineExceeded
	}
	for {
		n, err := s.conn.Read(s.rbuf)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return nil, fmt.Errorf("client port unreachable (client gave up or exited): %w", err)
			}
			return nil, err
		}
		if n == 4 && s.rbuf[0] == 0 && s.rbuf[1] == byte(OpACK) {
			s.ack.Block = uint16(s.rbuf[2])<<8 | uint16(s.rbuf[3])
			return &s.ack, nil
		}
		p, err := ParsePacket(s.rbuf[:n])
		if err != nil {
			continue
		}
		if e, ok := p.(*Error); ok {
			return nil, clientError{e}
		}
		return p, nil
	}
}

// sendBlocks sends blocks from..end (inclusive) in batches of at most
// len(s.pkts) packets.
func (s *sender) sendBlocks(from, end uint64) error {
	if s.loading != nil {
		if m := s.loading.memory(); m != nil && int64(len(m)) == s.size {
			s.mem, s.loading = m, nil
		}
	}
	for from <= end {
		k := 0
		for ; k < len(s.pkts) && from <= end; k, from = k+1, from+1 {
			p := &s.pkts[k]
			putDataHeader(p.hdr[:], uint16(from))
			off := int64(from-1) * int64(s.blk)
			want := int(min(int64(s.blk), s.size-off))
			if s.mem != nil {
				p.payload = s.mem[off : off+int64(want)]
				continue
			}
			p.payload = s.buf[k*s.blk : k*s.blk+want]
			if want > 0 {
				n, err := s.file.ReadAt(p.payload, off)
				if n < want {
					if err == nil || err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return fmt.Errorf("reading block %d at offset %d: %w (file shrank while being served?)", from, off, err)
				}
			}
		}
		if err := s.out.writeData(s.pkts[:k]); err != nil {
			return err
		}
	}
	return nil
}

// isTransient reports write errors that only mean "this datagram was
// dropped locally": a full qdisc or socket buffer (ENOBUFS, EAGAIN), or a
// local firewall rule that dropped it (EPERM, as nftables' output hook
// reports). The retransmission timer recovers from those like from any
// other loss, and gives up if they persist.
func isTransient(err error) bool {
	return errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EPERM)
}

var _ transferConn = (*net.UDPConn)(nil)
