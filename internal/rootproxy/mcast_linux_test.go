package rootproxy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// The rig: a server namespace with the NBD server and the multicast
// Sender of one content, a client namespace with the proxy, joined by a
// veth pair, so the group is joined and crossed as on a LAN.
const (
	rigSrvLink, rigCliLink = "rps0", "rpc0"
	rigSrvIP, rigCliIP     = "10.78.0.1", "10.78.0.2"
)

var rigGroup = netip.MustParseAddrPort("239.78.1.9:10811")

// dropData stands between the Sender and its socket and, while drop is
// set, loses every data datagram, as a switch without an IGMP querier or
// a firewall would.
type dropData struct {
	net.PacketConn
	drop *atomic.Bool
}

func (c dropData) WriteTo(b []byte, to net.Addr) (int, error) {
	if typ, _, err := chunkwire.Peek(b); err == nil && typ == chunkwire.TypeData && c.drop.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, to)
}

type rig struct {
	e       *memExport
	sender  *mcast.Sender
	drop    atomic.Bool // the group's data is lost
	base    []byte
	proxy   *Proxy
	k       *kernel
	started time.Time
	id      chunkwire.ContentID
}

// newRig serves a read-only base of size bytes by NBD and by multicast
// (data dropped when drop) and attaches a proxy with a cache of it all,
// reading ahead k chunks of order.
func newRig(t *testing.T, size int, drop bool, order []uint32, k int) *rig {
	t.Helper()
	return newRigSilence(t, size, drop, order, k, 500*time.Millisecond)
}

// newRigSilence is newRig with the Receiver's Silence.
func newRigSilence(t *testing.T, size int, drop bool, order []uint32, k int, silence time.Duration) *rig {
	t.Helper()
	testutil.NeedNetns(t)
	srv, cli := testutil.GroupPair(t, "rp", rigSrvLink, rigCliLink, rigSrvIP, rigCliIP)
	r := &rig{e: newMemExport(size, 11), id: chunkwire.ContentID{0xbf, 0x31, 0x78}}
	r.e.readOnly = true
	r.base = r.e.snapshot()
	id := r.id

	var ln net.Listener
	var udp *net.UDPConn
	testutil.InNetns(t, srv, func() {
		var err error
		if ln, err = net.Listen("tcp", rigSrvIP+":0"); err != nil {
			t.Error(err)
			return
		}
		ifi, err := net.InterfaceByName(rigSrvLink)
		if err == nil {
			udp, err = mcast.ListenSender(netip.MustParseAddrPort(rigSrvIP+":0"), ifi, 0)
		}
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { udp.Close() })
	r.drop.Store(drop)
	sender, err := mcast.NewSender(dropData{udp, &r.drop}, mcast.SenderConfig{Rate: 100 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r.sender = sender
	if err := sender.Add(mcast.Content{ID: id, Group: rigGroup, Size: int64(size), Data: bytes.NewReader(r.base)}); err != nil {
		t.Fatal(err)
	}
	testutil.ServeInNetns(t, srv, sender.Run)
	testutil.ServeInNetns(t, srv, func(ctx context.Context) error {
		return nbd.NewServer(oneExport{r.e}, nbd.Config{ShutdownGrace: time.Millisecond}).Serve(ctx, ln)
	})

	base := dialer(ln.Addr().String())
	dial := func(ctx context.Context, attempt int) (c net.Conn, info nbd.Negotiated, server string, err error) {
		<-testutil.GoNetns(cli, func() { c, info, server, err = base(ctx, attempt) })
		return
	}
	up, err := NewUpstream(context.Background(), UpstreamConfig{Dial: dial, Timeout: 2 * time.Second, GiveUp: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	// Where the group delivers, the first read may wait for it longer
	// than DefaultProbe: on a loaded machine 10 ms lapsed before the
	// first chunk came, and the read went by unicast.
	probe := DefaultProbe
	if !drop {
		probe = time.Second
	}
	testutil.InNetns(t, cli, func() {
		ifi, err := net.InterfaceByName(rigCliLink)
		if err == nil {
			r.proxy, err = New(Config{Upstream: up, CacheBytes: int64(size), Base: true, Order: order, ReadAhead: k, Probe: probe,
				Multicast: &mcast.ReceiverConfig{Server: udp.LocalAddr().(*net.UDPAddr).AddrPort(), Group: rigGroup,
					Interface: ifi, Content: id, Silence: silence}})
		}
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.proxy.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	r.k = attachKernel(t, r.proxy)
	return r
}

// readAll reads the export front to back in the kernel's 128 KiB reads
// and fails t unless it is the base.
func (r *rig) readAll(t *testing.T) {
	t.Helper()
	r.readRange(t, 0, len(r.base))
}

// readRange reads bytes from..to of the export as readAll does.
func (r *rig) readRange(t *testing.T, from, to int) {
	t.Helper()
	const step = 128 << 10
	for off := from; off < to; off += step {
		n := min(step, to-off)
		got, err := r.k.do(nbd.CmdRead, int64(off), nil, n)
		if err != nil {
			t.Fatalf("read %d+%d: %v", off, n, err)
		}
		if !bytes.Equal(got, r.base[off:off+n]) {
			t.Fatalf("read %d+%d: not the base's bytes", off, n)
		}
	}
}

// TestProxyReadsTheBaseFromTheGroup: every byte of the base arrives by
// multicast; the NBD server sends none, and a second pass is all hits.
func TestProxyReadsTheBaseFromTheGroup(t *testing.T) {
	const size = 8 << 20
	r := newRig(t, size, false, nil, 0)
	r.readAll(t)
	st := r.proxy.Stats()
	if st.Multicast != "on" || st.MulticastBytes < size || st.UnicastBytes != 0 || st.Fallbacks != 0 || r.e.read.Load() != 0 {
		t.Fatalf("stats %+v, server sent %d bytes by NBD: want the whole base by multicast, none by unicast", st, r.e.read.Load())
	}
	r.readAll(t)
	if st2 := r.proxy.Stats(); st2.HitBytes-st.HitBytes != size || st2.MulticastBytes != st.MulticastBytes {
		t.Fatalf("second pass: stats %+v after %+v, want %d more hit bytes and nothing more from the group", st2, st, size)
	}
}

// TestProxyFallsBackWhenTheGroupIsSilent: with the group's data dropped,
// the first read waits only the probe, every read goes by unicast without
// waiting out the Receiver's Silence, and once that has passed the stats
// say the group is silent.
func TestProxyFallsBackWhenTheGroupIsSilent(t *testing.T) {
	const size = 2 << 20
	const silence = 3 * time.Second
	r := newRigSilence(t, size, true, inOrder(size), 16, silence)
	start := time.Now()
	r.readAll(t)
	took := time.Since(start)
	st := r.proxy.Stats()
	if st.MulticastBytes != 0 || st.UnicastBytes < size || st.Fallbacks != 1 {
		t.Fatalf("stats %+v: want the base by unicast, one fallback (the probe)", st)
	}
	// Each miss asking the group would have the server multicast the
	// whole base into the drop; the probe's read and a reprobe a second
	// may ask. Counted as distinct chunks: the Receiver asks the probe's
	// again while the server stays quiet (every RepairAfter until
	// Silence), so passes grow with the time a loaded machine takes.
	cs, _ := r.sender.ContentStats(r.id)
	perChunk := uint64(chunkwire.FragmentsPerChunk * (chunkwire.DataHeaderLen + chunkwire.FragmentSize))
	if asked, most := (cs.Bytes-cs.Again)/perChunk, uint64(4*(2+took/ReprobeEvery)); asked > most {
		t.Fatalf("the server multicast %d distinct chunks into the dropped group in %v, want at most %d: misses keep asking a gone group", asked, took, most)
	}
	if took >= silence/2 {
		t.Fatalf("reading %d bytes took %v with the group dropped: the reads waited for the silence of %v, not a probe of %v", size, took, silence, DefaultProbe)
	}
	testutil.Eventually(t, 3*silence, "the group given up as silent", func() error {
		if st := r.proxy.Stats(); st.Multicast != "silent" {
			return fmt.Errorf("group %s %v after the reads began, want silent", st.Multicast, time.Since(start))
		}
		return nil
	})
}

// TestProxyNoticesTheGroupComingBack: a group dropped at first and
// delivering later (a querier appeared) is noticed by the reprobe, and
// the misses after it come from the group again.
func TestProxyNoticesTheGroupComingBack(t *testing.T) {
	const size = 4 << 20
	r := newRigSilence(t, size, true, nil, 0, 10*time.Second)
	r.readRange(t, 0, size/4)
	if st := r.proxy.Stats(); st.MulticastBytes != 0 || st.Fallbacks != 1 {
		t.Fatalf("stats %+v with the group dropped: want all by unicast after one probe", st)
	}
	r.drop.Store(false)
	time.Sleep(ReprobeEvery + 100*time.Millisecond)
	r.readRange(t, size/4, size/2)
	testutil.Eventually(t, 5*time.Second, "the group heard again", func() error {
		if !r.proxy.rcv.Heard() {
			return fmt.Errorf("nothing from the group after its drop ended")
		}
		return nil
	})
	before := r.proxy.Stats()
	r.readRange(t, size/2, size)
	if st := r.proxy.Stats(); st.MulticastBytes-before.MulticastBytes < size/4 {
		t.Fatalf("stats %+v after %+v: want most of the last half from the group once it delivers", st, before)
	}
}
