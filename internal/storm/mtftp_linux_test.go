package storm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/testutil"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// The rig: the carousel in one namespace, the machines in another, a
// veth pair between them, the group routed over it as on a LAN.
const (
	mtSrvLink, mtCliLink = "mts0", "mtc0"
	mtSrvIP, mtCliIP     = "10.78.0.1", "10.78.0.2"
)

type mtftpRig struct {
	t        *testing.T
	srv, cli string
	group    *mtftpGroup
}

func newMTFTPRig(t *testing.T) *mtftpRig {
	t.Helper()
	testutil.NeedNetns(t)
	srv, cli := testutil.GroupPair(t, "mt", mtSrvLink, mtCliLink, mtSrvIP, mtCliIP)
	r := &mtftpRig{t: t, srv: srv, cli: cli}
	testutil.InNetns(t, cli, func() {
		ifi, err := net.InterfaceByName(mtCliLink)
		if err == nil {
			r.group, err = listenMTFTP(MTFTPGroup, ifi)
		}
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { r.group.close() })
	return r
}

// carousel starts a testCarousel of content, named file, whose control
// socket listens on port (its data socket on another), until the test ends.
func (r *mtftpRig) carousel(file string, content []byte, port uint16, drop func(int64) bool) *testCarousel {
	t := r.t
	t.Helper()
	c := &testCarousel{group: MTFTPGroup, file: file, content: content, gap: 50 * time.Microsecond,
		drop: drop, wakeup: make(chan struct{}, 1)}
	testutil.InNetns(t, r.srv, func() {
		ifi, err := net.InterfaceByName(mtSrvLink)
		if err != nil {
			t.Error(err)
			return
		}
		if c.data, err = mcast.ListenSender(netip.MustParseAddrPort(mtSrvIP+":0"), ifi, 1); err != nil {
			t.Error(err)
			return
		}
		if c.ctl, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(mtSrvIP), port))); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.serve(ctx) }()
	go func() { defer wg.Done(); c.run(ctx) }()
	t.Cleanup(func() { cancel(); c.ctl.Close(); c.data.Close(); wg.Wait() })
	return c
}

// fetch gets path from the server's port by mtftp into a buffer, its
// sockets in the machines' namespace; plain TFTP goes to port 69.
func (r *mtftpRig) fetch(ctx context.Context, port uint16, path string) ([]byte, int64, MTFTPStats, error) {
	local := netip.MustParseAddr(mtCliIP)
	server := netip.AddrPortFrom(netip.MustParseAddr(mtSrvIP), port)
	buf := &writerAtBuffer{}
	o := mtftpGet{server: server, path: path, w: buf,
		open: func() (c *net.UDPConn, err error) {
			err = <-testutil.GoNetns(r.cli, func() {
				c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
			})
			return c, err
		},
		plain: func(ctx context.Context, path string, w io.Writer) (n int64, err error) {
			if e := <-testutil.GoNetns(r.cli, func() { n, err = plainTFTP(ctx, local, server, path, w) }); e != nil {
				return 0, e
			}
			return n, err
		},
	}
	n, st, err := r.group.get(ctx, o)
	return buf.bytes(), n, st, err
}

type writerAtBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (w *writerAtBuffer) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end := int(off) + len(p); end > len(w.b) {
		w.b = append(w.b, make([]byte, end-len(w.b))...)
	}
	return copy(w.b[off:], p), nil
}

func (w *writerAtBuffer) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.b)
}

// TestMTFTPFetch: one machine asks and gets the whole file from the group.
func TestMTFTPFetch(t *testing.T) {
	r := newMTFTPRig(t)
	content := testutil.RandomBytes(1, 300*1024+77)
	c := r.carousel("boot/kernel", content, mtftpPort, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, n, st, err := r.fetch(ctx, mtftpPort, "boot/kernel")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) || n != int64(len(content)) {
		t.Fatalf("got %d bytes (counted %d), want the %d of the file", len(got), n, len(content))
	}
	if st.MulticastBytes != int64(len(content)) || st.UnicastBytes != 0 || st.RRQs != 1 || st.FellBack {
		t.Fatalf("stats %+v, want every byte by multicast after 1 RRQ", st)
	}
	if c.rrqs.Load() != 1 {
		t.Fatalf("carousel got %d RRQs, want 1", c.rrqs.Load())
	}
}

// TestMTFTPJoinMidCycle: a machine that asks while the carousel is half
// way through another's cycle gets the blocks after its RRQ, and the ones
// before from the cycle its RRQ added, and the carousel sends no more.
func TestMTFTPJoinMidCycle(t *testing.T) {
	r := newMTFTPRig(t)
	content := testutil.RandomBytes(2, 1<<20)
	c := r.carousel("k", content, mtftpPort, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		got []byte
		st  MTFTPStats
		err error
	}
	results := make(chan result, 2)
	go func() {
		got, _, st, err := r.fetch(ctx, mtftpPort, "/k")
		results <- result{got, st, err}
	}()
	half := int64(c.blocks() / 2)
	testutil.Eventually(t, 10*time.Second, "half a cycle sent", func() error {
		if c.sent.Load() < half {
			return errors.New("not yet")
		}
		return nil
	})
	go func() {
		got, _, st, err := r.fetch(ctx, mtftpPort, "k")
		results <- result{got, st, err}
	}()
	for range 2 {
		res := <-results
		if res.err != nil {
			t.Fatal(res.err)
		}
		if !bytes.Equal(res.got, content) || res.st.MulticastBytes != int64(len(content)) || res.st.RRQs != 1 {
			t.Fatalf("got %d bytes, stats %+v; want the %d bytes of the file by multicast after 1 RRQ", len(res.got), res.st, len(content))
		}
	}
	if sent, most := c.sent.Load(), c.lastRRQ.Load()+int64(c.blocks()); sent > most || c.rrqs.Load() != 2 {
		t.Fatalf("carousel sent %d datagrams for %d RRQs, want 2 and at most %d: the second RRQ extends the cycle", sent, c.rrqs.Load(), most)
	}
}

// TestMTFTPLostBlockRecovered: a block lost in the cycle leaves a gap;
// the machine's timer expires, it reopens and asks again, and the next
// cycle fills it.
func TestMTFTPLostBlockRecovered(t *testing.T) {
	r := newMTFTPRig(t)
	content := testutil.RandomBytes(3, 100*1024)
	r.carousel("k", content, mtftpPort, func(n int64) bool { return n == 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, _, st, err := r.fetch(ctx, mtftpPort, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("got %d bytes unlike the file's %d", len(got), len(content))
	}
	if st.Reopens < 1 || st.RRQs != 2 || st.FellBack {
		t.Fatalf("stats %+v, want a reopen and a second RRQ, no fallback", st)
	}
}

// TestMTFTPSilenceFallsBackToTFTP: nothing answers on the MTFTP port;
// after iPXE's fourth silent expiry (0 + 1/4 + 1/2 + 1 s) the machine
// fetches the same path by plain TFTP from port 69.
func TestMTFTPSilenceFallsBackToTFTP(t *testing.T) {
	r := newMTFTPRig(t)
	content := testutil.RandomBytes(4, 200*1024+3)
	r.plainTFTP(map[string][]byte{"boot/k": content})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	got, n, st, err := r.fetch(ctx, mtftpPort, "/boot/k")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) || n != int64(len(content)) {
		t.Fatalf("got %d bytes (counted %d), want the file's %d", len(got), n, len(content))
	}
	if !st.FellBack || st.RRQs != 3 || st.MulticastBytes != 0 {
		t.Fatalf("stats %+v, want 3 RRQs unanswered and the fallback", st)
	}
	if took < 1750*time.Millisecond || took > 4*time.Second {
		t.Fatalf("took %v, want the fallback after 1.75 s and TFTP's transfer", took)
	}
}

// TestMTFTPWrongPeerDropped: once the first DATA made the carousel the
// peer, another sender's DATA on the same group is dropped, not written.
func TestMTFTPWrongPeerDropped(t *testing.T) {
	r := newMTFTPRig(t)
	content := testutil.RandomBytes(5, 1<<20)
	c := r.carousel("k", content, mtftpPort, nil)
	rogue := r.carousel("other", testutil.RandomBytes(6, 1<<20), mtftpPort+1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil && c.sent.Load() < 10 {
			time.Sleep(time.Millisecond)
		}
		rogue.kick()
	}()
	got, _, st, err := r.fetch(ctx, mtftpPort, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatal("the file has blocks of the other sender")
	}
	if st.Dropped == 0 || rogue.sent.Load() == 0 {
		t.Fatalf("stats %+v, rogue sent %d: want the rogue's datagrams dropped", st, rogue.sent.Load())
	}
}

// TestMTFTPErrorFailsTheURL: an RRQ for a file the carousel does not
// hold gets an ERROR, which ends the fetch at once (the script's
// fallback URL is next), with no plain TFTP.
func TestMTFTPErrorFailsTheURL(t *testing.T) {
	r := newMTFTPRig(t)
	r.carousel("k", testutil.RandomBytes(7, 4096), mtftpPort, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, _, st, err := r.fetch(ctx, mtftpPort, "not-on-air")
	if !errors.Is(err, ErrMTFTPServer) || st.FellBack {
		t.Fatalf("err %v, stats %+v; want %v and no fallback", err, st, ErrMTFTPServer)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v, want the ERROR's round trip", took)
	}
}

// plainTFTP answers RRQs on port 69 for files, as an old server
// does: no options, 512-byte blocks in lockstep, from the port the RRQ
// came to (one socket, so that it stays in the rig's namespace).
func (r *mtftpRig) plainTFTP(files map[string][]byte) {
	t := r.t
	var c *net.UDPConn
	testutil.InNetns(t, r.srv, func() {
		var err error
		if c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(mtSrvIP), Port: 69}); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, src, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			p, err := tftp.ParsePacket(buf[:n])
			rq, ok := p.(*tftp.Request)
			if err != nil || !ok {
				continue
			}
			b, found := files[rq.Filename]
			if !found {
				c.WriteToUDPAddrPort((&tftp.Error{Code: tftp.ErrCodeFileNotFound, Message: rq.Filename}).Append(nil), src)
				continue
			}
			for blk := 1; (blk-1)*512 <= len(b); blk++ {
				d := (&tftp.Data{Block: uint16(blk), Payload: b[(blk-1)*512 : min(blk*512, len(b))]}).Append(nil)
				for try := 0; try < 5; try++ {
					c.WriteToUDPAddrPort(d, src)
					c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
					n, _, err := c.ReadFromUDPAddrPort(buf)
					if a, _ := tftp.ParsePacket(buf[:max(n, 0)]); err == nil {
						if ack, ok := a.(*tftp.Ack); ok && int(ack.Block) == blk {
							break
						}
					}
				}
			}
			c.SetReadDeadline(time.Time{})
		}
	}()
}
