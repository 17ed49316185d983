package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// The flood generators of TestFloodsWhileBooting. Each runs from its own
// namespace (one host, floodIP) until ctx ends or its count is spent, at
// a bounded rate: the test is about the server's behaviour, so the
// generator must not simply take the two CPUs from everyone. Each counts
// what it sent and what came back in a floodCounts, live.

// floodCounts tallies a flood's outcomes by name.
type floodCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *floodCounts) add(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[what]++
}

func (c *floodCounts) get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[what]
}

func (c *floodCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

// tick calls f every interval, at most count times, until ctx ends.
func tick(ctx context.Context, interval time.Duration, count int, f func(i int)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := range count {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(i)
	}
}

// udpIn opens a UDP socket inside ns on laddr, allowed to broadcast.
func udpIn(ns *netns, laddr string) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := inNetns(ns, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1) })
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", laddr)
		if err != nil {
			return err
		}
		c = pc.(*net.UDPConn)
		return nil
	})
	return c, err
}

// dhcpFloodMACs start with this octet (locally administered), so the
// flood can tell its replies from the legitimate machines'.
const dhcpFloodOctet = 0x0a

// floodDHCP is a starvation attack: DISCOVERs from random MACs, at most
// count of them, one every interval, and a REQUEST for every OFFER, so
// each offered address is taken for real.
func floodDHCP(ctx context.Context, ns *netns, interval time.Duration, count int) (*floodCounts, error) {
	c, err := udpIn(ns, "0.0.0.0:68")
	if err != nil {
		return nil, err
	}
	var got floodCounts
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: 67}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			m, err := dhcpv4.FromBytes(buf[:n])
			if err != nil || len(m.ClientHWAddr) != 6 || m.ClientHWAddr[0] != dhcpFloodOctet {
				continue
			}
			got.add(m.MessageType().String())
			if m.MessageType() == dhcpv4.MessageTypeOffer {
				if req, err := dhcpv4.NewRequestFromOffer(m, dhcpv4.WithBroadcast(true)); err == nil {
					c.WriteToUDP(req.ToBytes(), bcast)
					got.add("REQUEST sent")
				}
			}
		}
	}()
	go tick(ctx, interval, count, func(int) {
		mac := make(net.HardwareAddr, 6)
		rand.Read(mac)
		mac[0] = dhcpFloodOctet
		d, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true))
		if err != nil {
			return
		}
		if _, err := c.WriteToUDP(d.ToBytes(), bcast); err == nil {
			got.add("DISCOVER sent")
		}
	})
	return &got, nil
}

// floodTFTP sends RRQs for file from ports sockets (each its own source
// port), one every interval, round robin, at most count, and never ACKs
// anything: every transfer the server starts waits on its retransmissions.
func floodTFTP(ctx context.Context, ns *netns, file string, ports, count int, interval time.Duration) (*floodCounts, error) {
	var socks []*net.UDPConn
	err := inNetns(ns, func() error {
		for range ports {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{})
			if err != nil {
				return err
			}
			socks = append(socks, c)
		}
		return nil
	})
	go func() {
		<-ctx.Done()
		for _, c := range socks {
			c.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	var got floodCounts
	rrq := []byte("\x00\x01" + file + "\x00octet\x00blksize\x001468\x00windowsize\x0064\x00")
	server := &net.UDPAddr{IP: net.ParseIP(serverIP), Port: 69}
	go tick(ctx, interval, count, func(i int) {
		if _, err := socks[i%len(socks)].WriteToUDP(rrq, server); err == nil {
			got.add("RRQ sent")
		}
	})
	return &got, nil
}

// floodHTTP holds slow connections (a header line every second, never
// the blank line that ends the header), sends requests whose header is
// past the limit and API requests whose body is past the limit, each kind
// at a bounded rate, until ctx ends.
func floodHTTP(ctx context.Context, ns *netns, slow int, token string) (*floodCounts, error) {
	var got floodCounts
	addr := serverIP + ":8080"
	for i := range slow {
		go func() {
			// Spread the connects, and so the cuts 10 s after them, over
			// 5 s: the generator must not burst.
			select {
			case <-time.After(time.Duration(i) * 5 * time.Second / time.Duration(slow)):
			case <-ctx.Done():
				return
			}
			for ctx.Err() == nil {
				c, err := ns.dial("tcp", addr, 5*time.Second)
				if err != nil {
					got.add("slow connect failed")
					sleepCtx(ctx, time.Second)
					continue
				}
				got.add("slow connected")
				stop := context.AfterFunc(ctx, func() { c.Close() })
				_, err = c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\n"))
				for j := 0; err == nil && ctx.Err() == nil; j++ {
					sleepCtx(ctx, time.Second)
					_, err = fmt.Fprintf(c, "X-Slow-%d: %d\r\n", j, j)
				}
				stop()
				c.Close()
				got.add("slow cut")
				sleepCtx(ctx, time.Second)
			}
		}()
	}
	client := ns.httpClient(10 * time.Second)
	huge := strings.Repeat("h", 128<<10)
	go tick(ctx, 500*time.Millisecond, 120, func(int) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		req.Header.Set("X-Huge", huge)
		resp, err := client.Do(req)
		got.add(status("huge header", resp, err))
	})
	body := bytes.Repeat([]byte(" "), 2<<20)
	go tick(ctx, 500*time.Millisecond, 120, func(int) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/machines", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		got.add(status("big body", resp, err))
	})
	return &got, nil
}

// status names a response's outcome for floodCounts.
func status(what string, resp *http.Response, err error) string {
	if err != nil {
		return what + ": error"
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return fmt.Sprintf("%s: %d", what, resp.StatusCode)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// floodNBD attaches unread sessions to target, which send requests and
// never read a reply (floodUnread), then opens count connections, one
// every interval, that never say a word after the greeting.
func floodNBD(ctx context.Context, ns *netns, count int, interval time.Duration, target rootarg.Target, unread int) (*floodCounts, error) {
	var got floodCounts
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		<-ctx.Done()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	keep := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	for range unread {
		c, err := attachNBD(ns, target)
		if err != nil {
			return nil, fmt.Errorf("attach an unread session: %w", err)
		}
		if !keep(c.c) {
			break
		}
		go floodUnread(ctx, c, &got)
	}
	go tick(ctx, interval, count, func(int) {
		c, err := ns.dial("tcp", target.Addr(), 5*time.Second)
		if err != nil {
			got.add("connect failed")
			return
		}
		if keep(c) {
			got.add("connected")
		}
	})
	return &got, nil
}

// floodUnread sends on c, and never reads, a READ of nbd.MaxPayload,
// whose reply fills the socket, and then WRITEs of unreadWrite bytes,
// unreadRequests in all: their replies queue behind the first, each
// holding its share of the server's buffer budget, until the server stops
// taking requests. The send blocks then, until ctx ends and the
// connection is closed.
func floodUnread(ctx context.Context, c *nbdConn, got *floodCounts) {
	payload := make([]byte, unreadWrite)
	for i := range uint64(unreadRequests) {
		req := nbd.Request{Type: nbd.CmdWrite, Handle: i, Offset: i * unreadWrite % c.size, Length: unreadWrite}
		data := payload
		if i == 0 {
			req.Type, req.Offset, req.Length, data = nbd.CmdRead, 0, nbd.MaxPayload, nil
		}
		if err := c.send(req, data); err != nil {
			got.add(req.Type.String() + " not taken")
			return
		}
		got.add(req.Type.String() + " sent")
	}
}

const (
	unreadWrite    = 4 << 20
	unreadRequests = 40
)
