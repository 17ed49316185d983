package tftp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// testClient is an RFC 7440 receiver with knobs to misbehave: drop chosen
// DATA packets, duplicate ACKs, ignore the OACK. It records every DATA block
// it sees, so tests can check where retransmission resumed.
type testClient struct {
	server  *net.UDPAddr
	mode    string
	opts    []Option
	timeout time.Duration // client-side retransmission of the last ACK

	// drop returns true to discard DATA for block index idx (1-based,
	// unwrapped); seen counts earlier arrivals of that block.
	drop func(idx uint64, seen int) bool
	// dupAcks sends every ACK this many extra times.
	dupAcks int
	// ignoreOACKs ignores this many OACKs before answering one.
	ignoreOACKs int
	// refuseOACK answers the OACK with ERROR 8.
	refuseOACK bool
	// dropAck returns true to not send the ACK for block index n; seen
	// counts earlier ACKs for n.
	dropAck func(n uint64, seen int) bool
	// atftpDups makes a windowed client answer unexpected blocks like
	// atftp 0.8 (seen on the wire): the first unexpected block, duplicate
	// or gap, after in-order progress draws one ACK of the last in-order
	// block; later ones are ignored until an in-order block arrives.
	atftpDups bool

	mu     sync.Mutex
	trace  []uint64 // unwrapped block index of every DATA received, in order
	acks   []uint64
	oack   []Option
	nDATA  int
	gotErr *Error
}

func newTestClient(server net.Addr) *testClient {
	return &testClient{server: server.(*net.UDPAddr), mode: "octet", timeout: 3 * time.Second}
}

func (c *testClient) withOpts(kv ...string) *testClient {
	for i := 0; i+1 < len(kv); i += 2 {
		c.opts = append(c.opts, Option{kv[i], kv[i+1]})
	}
	return c
}

// get downloads name and returns its content.
func (c *testClient) get(ctx context.Context, name string) ([]byte, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	rrq := (&Request{Op: OpRRQ, Filename: name, Mode: c.mode, Options: c.opts}).Append(nil)
	if _, err := conn.WriteToUDP(rrq, c.server); err != nil {
		return nil, err
	}
	var (
		peer     *net.UDPAddr
		blk      = 512
		window   = 1
		received uint64 // highest in-order block
		lastAck  uint64
		out      []byte
		buf      = make([]byte, 70000)
		started  bool // first DATA or OACK handled
		idleRuns int
		seen     = map[uint64]int{}
		ackSeen  = map[uint64]int{}
		reacked  bool // atftpDups: the extra ACK since the last in-order block was sent
	)
	sendAck := func(n uint64) error {
		c.mu.Lock()
		c.acks = append(c.acks, n)
		c.mu.Unlock()
		ackSeen[n]++
		if c.dropAck != nil && c.dropAck(n, ackSeen[n]-1) {
			lastAck = n
			return nil
		}
		pkt := (&Ack{Block: uint16(n)}).Append(nil)
		for i := 0; i <= c.dupAcks; i++ {
			if _, err := conn.WriteToUDP(pkt, peer); err != nil {
				return err
			}
		}
		lastAck = n
		return nil
	}
	for {
		conn.SetReadDeadline(time.Now().Add(c.timeout))
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && idleRuns < 5 {
				idleRuns++
				if !started { // like real clients, repeat a lost RRQ
					if _, err := conn.WriteToUDP(rrq, c.server); err != nil {
						return nil, err
					}
					continue
				}
				if err := sendAck(received); err != nil {
					return nil, err
				}
				continue
			}
			return nil, fmt.Errorf("client read (received %d blocks): %w", received, err)
		}
		idleRuns = 0
		if peer == nil {
			peer = from
		} else if !from.IP.Equal(peer.IP) || from.Port != peer.Port {
			continue // wrong transfer ID
		}
		p, err := ParsePacket(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("client: server sent undecodable packet: %w", err)
		}
		switch p := p.(type) {
		case *Error:
			c.mu.Lock()
			c.gotErr = p
			c.mu.Unlock()
			return nil, p
		case *OAck:
			if started {
				continue
			}
			if c.ignoreOACKs > 0 {
				c.ignoreOACKs--
				continue
			}
			if c.refuseOACK {
				conn.WriteToUDP((&Error{Code: ErrCodeOptionRefused, Message: "no thanks"}).Append(nil), peer)
				return nil, errors.New("refused OACK")
			}
			c.mu.Lock()
			c.oack = p.Options
			c.mu.Unlock()
			for _, o := range p.Options {
				v, _ := strconv.Atoi(o.Value)
				switch strings.ToLower(o.Name) {
				case "blksize":
					blk = v
				case "windowsize":
					window = v
				}
			}
			started = true
			if err := sendAck(0); err != nil {
				return nil, err
			}
		case *Data:
			started = true
			// Unwrap relative to the next expected block.
			idx := received + 1 + uint64(int64(int16(p.Block-uint16(received+1))))
			c.mu.Lock()
			c.trace = append(c.trace, idx)
			c.nDATA++
			c.mu.Unlock()
			if c.drop != nil && c.drop(idx, seen[idx]) {
				seen[idx]++
				continue
			}
			seen[idx]++
			switch {
			case idx == received+1:
				received = idx
				reacked = false
				out = append(out, p.Payload...)
				if len(p.Payload) < blk {
					if err := sendAck(received); err != nil {
						return nil, err
					}
					return out, nil
				}
				if received-lastAck >= uint64(window) {
					if err := sendAck(received); err != nil {
						return nil, err
					}
				}
			case idx > received+1:
				// Gap: ACK the last in-order block once (RFC 7440 section 4).
				if lastAck != received {
					if err := sendAck(received); err != nil {
						return nil, err
					}
				}
			case idx == received && window == 1:
				// Lockstep duplicate: our ACK was lost; repeat it.
				if err := sendAck(received); err != nil {
					return nil, err
				}
			case c.atftpDups:
				if !reacked {
					reacked = true
					if err := sendAck(received); err != nil {
						return nil, err
					}
				}
			}
		}
	}
}

// goBackPoints returns, for each place the trace goes backwards (a
// retransmission), the block it restarted from.
func (c *testClient) goBackPoints() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uint64
	var hi uint64
	for _, b := range c.trace {
		if b <= hi {
			out = append(out, b)
			hi = b
			continue
		}
		hi = b
	}
	return out
}
