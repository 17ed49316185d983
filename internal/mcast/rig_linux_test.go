package mcast

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// The rig is two namespaces joined by a veth pair: the Sender in one,
// the receivers in the other, so every datagram crosses a real
// interface and the group is joined as on a LAN.
const (
	srvLink, cliLink = "mcs0", "mcc0"
	srvIP            = "10.77.0.1"
	cliIP            = "10.77.0.2"
)

var testGroup = netip.MustParseAddrPort("239.77.1.9:10810")

type rig struct {
	t          *testing.T
	srv, cli   string
	content    []byte
	id         chunkwire.ContentID
	sender     *Sender
	conn       *dropConn
	serverAddr netip.AddrPort
}

// dropConn stands between the Sender and its socket: drop says which data
// datagrams (numbered from 1 as the Sender writes them) never leave, as a
// network that loses them would. It counts the data datagrams and bytes
// the Sender wrote before they leave, so once a receiver has them, the
// counts include them (the Sender's own stats are counted just after).
type dropConn struct {
	net.PacketConn
	drop  func(n uint64) bool
	n     atomic.Uint64
	bytes atomic.Uint64
}

func (c *dropConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if typ, _, err := chunkwire.Peek(b); err == nil && typ == chunkwire.TypeData {
		c.bytes.Add(uint64(len(b)))
		if c.drop(c.n.Add(1)) {
			return len(b), nil
		}
	}
	return c.PacketConn.WriteTo(b, to)
}

// newRig starts a Sender of size random bytes with cfg in a fresh pair of
// namespaces; drop (nil: none) loses data datagrams.
func newRig(t *testing.T, size int, cfg SenderConfig, drop func(n uint64) bool) *rig {
	t.Helper()
	testutil.NeedNetns(t)
	srv, cli := testutil.GroupPair(t, "mc", srvLink, cliLink, srvIP, cliIP)
	r := &rig{t: t, srv: srv, cli: cli, content: make([]byte, size)}
	rng := rand.New(rand.NewPCG(uint64(size), 31))
	for i := range r.content {
		r.content[i] = byte(rng.Uint32())
	}
	r.id = chunkwire.ContentID{0xbf, 0x31, byte(size)}
	if drop == nil {
		drop = func(uint64) bool { return false }
	}
	var conn *net.UDPConn
	testutil.InNetns(t, srv, func() {
		ifi, err := net.InterfaceByName(srvLink)
		if err != nil {
			t.Error(err)
			return
		}
		conn, err = ListenSender(netip.MustParseAddrPort(srvIP+":0"), ifi, 0)
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { conn.Close() })
	r.serverAddr = conn.LocalAddr().(*net.UDPAddr).AddrPort()
	r.conn = &dropConn{PacketConn: conn, drop: drop}
	s, err := NewSender(r.conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Content{ID: r.id, Group: testGroup, Size: int64(size), Data: bytes.NewReader(r.content)}); err != nil {
		t.Fatal(err)
	}
	r.sender = s
	serve(t, srv, s.Run)
	return r
}

// serve runs run in ns until the test ends. The sockets are in their
// namespaces already; ns is where the goroutine runs, as for the server.
func serve(t *testing.T, ns string, run func(context.Context) error) {
	t.Helper()
	entered := testutil.ServeInNetns(t, ns, run)
	// ServeInNetns reports an error entering ns at once, and nil only when
	// run returns, which is after this cleanup.
	t.Cleanup(func() {
		select {
		case err := <-entered:
			if err != nil {
				t.Errorf("enter %s: %v", ns, err)
			}
		default:
		}
	})
}

// receiver joins the group in the client namespace with a cache of the
// whole content, and runs until the test ends.
func (r *rig) receiver(cfg ReceiverConfig) (*Receiver, *MemCache) {
	r.t.Helper()
	cache, err := NewMemCache(int64(len(r.content)), int(chunkwire.Chunks(int64(len(r.content)))))
	if err != nil {
		r.t.Fatal(err)
	}
	cfg.Server, cfg.Group, cfg.Content, cfg.Size, cfg.Cache = r.serverAddr, testGroup, r.id, int64(len(r.content)), cache
	var rc *Receiver
	testutil.InNetns(r.t, r.cli, func() {
		ifi, err := net.InterfaceByName(cliLink)
		if err == nil {
			cfg.Interface = ifi
			rc, err = NewReceiver(cfg)
		}
		if err != nil {
			r.t.Error(err)
		}
	})
	if r.t.Failed() {
		r.t.FailNow()
	}
	serve(r.t, r.cli, rc.Run)
	return rc, cache
}

// fetchAll has every receiver want the whole content at once and wait for
// each chunk; it returns how long the slowest took and each one's errors.
func (r *rig) fetchAll(rcs []*Receiver, within time.Duration) (time.Duration, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	chunks := chunkwire.Chunks(int64(len(r.content)))
	errs := make([]error, len(rcs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, rc := range rcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc.Want(0, chunks)
			for c := range chunks {
				if err := rc.Wait(ctx, c); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errs
}

// checkContent fails t unless cache holds the whole content.
func (r *rig) checkContent(name string, cache *MemCache) {
	r.t.Helper()
	got := make([]byte, len(r.content))
	if _, err := cache.ReadAt(got, 0); err != nil {
		r.t.Fatalf("%s: read the cache: %v", name, err)
	}
	if !bytes.Equal(got, r.content) {
		r.t.Fatalf("%s: the cache does not hold the content", name)
	}
}
