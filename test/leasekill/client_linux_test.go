package leasekill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// ack is one DHCPACK as the client saw it.
type ack struct {
	mac   string
	ip    string
	phase int
	at    time.Time
}

// client runs many simulated DHCP clients over one UDP socket in the client
// namespace. The server tells clients apart by chaddr, not by the Ethernet
// source address, and broadcasts its replies (no ciaddr yet), so one
// ordinary socket on port 68 serves every simulated MAC; replies are matched
// to the waiting exchange by xid.
type client struct {
	conn *net.UDPConn

	mu      sync.Mutex
	waiting map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4
}

// listenInNetns opens 0.0.0.0:68 bound to dev inside the named namespace.
// The socket keeps its namespace for life, so only its creation needs a
// thread that entered the namespace; that thread is never unlocked, which
// makes the runtime discard it instead of reusing it elsewhere.
func listenInNetns(ns, dev string) (*net.UDPConn, error) {
	type result struct {
		c   *net.UDPConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- result{err: fmt.Errorf("open namespace %s: %w", ns, err)}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter namespace %s: %w", ns, err)}
			return
		}
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
					if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, 1); serr != nil {
						return
					}
				}
				serr = unix.BindToDevice(int(fd), dev)
			})
			if err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:68")
		if err != nil {
			ch <- result{err: fmt.Errorf("listen on UDP 68 in %s: %w", ns, err)}
			return
		}
		ch <- result{c: pc.(*net.UDPConn)}
	}()
	r := <-ch
	return r.c, r.err
}

func newClient(conn *net.UDPConn) *client {
	c := &client{conn: conn, waiting: map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4{}}
	go c.readLoop()
	return c
}

// readLoop hands each reply to the exchange waiting on its xid; replies
// nobody waits for (late, duplicate) are dropped. It ends when conn closes.
func (c *client) readLoop() {
	buf := make([]byte, 4096)
	for {
		n, _, err := c.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
			continue
		}
		c.mu.Lock()
		ch := c.waiting[m.TransactionID]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default:
			}
		}
	}
}

var errNoAnswer = errors.New("no answer")

// exchange sends m (to the broadcast address, port 67) and waits for a
// reply of one of the wanted types, resending on timeout up to tries times.
func (c *client) exchange(ctx context.Context, m *dhcpv4.DHCPv4, tries int, timeout time.Duration, want ...dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	ch := make(chan *dhcpv4.DHCPv4, 4)
	c.mu.Lock()
	c.waiting[m.TransactionID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, m.TransactionID)
		c.mu.Unlock()
	}()
	dst := &net.UDPAddr{IP: net.IPv4bcast, Port: 67}
	for range tries {
		if _, err := c.conn.WriteToUDP(m.ToBytes(), dst); err != nil {
			return nil, fmt.Errorf("send %v: %w", m.MessageType(), err)
		}
		t := time.NewTimer(timeout)
	wait:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				break wait
			case r := <-ch:
				if !bytesEqual(r.ClientHWAddr, m.ClientHWAddr) {
					continue
				}
				for _, w := range want {
					if r.MessageType() == w {
						t.Stop()
						return r, nil
					}
				}
			}
		}
	}
	return nil, errNoAnswer
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// dora runs one DISCOVER-OFFER-REQUEST-ACK for mac. It returns the ACKed
// address, or an error (no offer, NAK, no ACK, ctx done).
func (c *client) dora(ctx context.Context, mac net.HardwareAddr) (net.IP, error) {
	d, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true))
	if err != nil {
		return nil, err
	}
	offer, err := c.exchange(ctx, d, 3, 700*time.Millisecond, dhcpv4.MessageTypeOffer)
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	req, err := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithBroadcast(true))
	if err != nil {
		return nil, err
	}
	r, err := c.exchange(ctx, req, 3, 700*time.Millisecond, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak)
	if err != nil {
		return nil, fmt.Errorf("request %v: %w", offer.YourIPAddr, err)
	}
	if r.MessageType() == dhcpv4.MessageTypeNak {
		return nil, fmt.Errorf("request %v: NAK %q", offer.YourIPAddr, r.Message())
	}
	return r.YourIPAddr.To4(), nil
}

// burst runs DORA for every MAC with workers exchanges in flight, calling
// onAck for each ACK as it arrives. It returns when all are done or ctx
// ends, with the number of exchanges that got no ACK.
func (c *client) burst(ctx context.Context, macs []net.HardwareAddr, workers int, onAck func(mac net.HardwareAddr, ip net.IP)) (failed int) {
	next := make(chan net.HardwareAddr)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for mac := range next {
				ip, err := c.dora(ctx, mac)
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				onAck(mac, ip)
			}
		}()
	}
feed:
	for _, m := range macs {
		select {
		case next <- m:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return failed
}
