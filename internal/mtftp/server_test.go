package mtftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// The tests run the server and iPXE-like clients on loopback: the group
// is joined on lo, where the kernel loops the server's DATA back to every
// member socket, as a switch would deliver it to every port.

type memFile struct {
	*bytes.Reader
	size int64
}

func (memFile) Close() error  { return nil }
func (f memFile) Size() int64 { return f.size }

// zeroFile is a large file without the memory.
type zeroFile struct{ size int64 }

func (zeroFile) Close() error  { return nil }
func (f zeroFile) Size() int64 { return f.size }
func (f zeroFile) ReadAt(b []byte, off int64) (int, error) {
	clear(b)
	return len(b), nil
}

type memFS map[string]tftp.File

func (m memFS) Open(name string) (tftp.File, error) {
	if f, ok := m[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

func content(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type rig struct {
	srv   *Server
	req   netip.AddrPort
	group netip.AddrPort
	lo    *net.Interface
}

// newRig runs a server for files on loopback at rate bytes per second.
func newRig(t *testing.T, files memFS, rate int64) *rig {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("loopback: %v", err)
	}
	req, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	// A group port of our own, so packages testing at once do not meet.
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	gport := probe.LocalAddr().(*net.UDPAddr).Port
	probe.Close()
	r := &rig{req: req.LocalAddr().(*net.UDPAddr).AddrPort(), group: netip.AddrPortFrom(DefaultGroup.Addr(), uint16(gport)), lo: lo}
	r.srv = New(Config{FS: files, Listen: r.req, Group: r.group, Interface: lo, Rate: rate})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx, req) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

// client is iPXE's mtftp client, as far as the server can tell: a
// unicast socket that sends the RRQ and a socket on the group, blocks
// kept in a bitmap in whatever order they come.
type client struct {
	t       *testing.T
	uni     *net.UDPConn
	mc      *net.UDPConn
	blocks  map[uint16][]byte
	first   uint16 // the first block heard
	last    int    // the short block's number, once heard
	arrived []time.Time
}

func (r *rig) client(t *testing.T) *client {
	t.Helper()
	uni, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := net.ListenMulticastUDP("udp4", r.lo, net.UDPAddrFromAddrPort(r.group))
	if err != nil {
		t.Fatalf("join %v on lo: %v", r.group, err)
	}
	mc.SetReadBuffer(4 << 20)
	t.Cleanup(func() { uni.Close(); mc.Close() })
	return &client{t: t, uni: uni, mc: mc, blocks: map[uint16][]byte{}}
}

func (c *client) rrq(r *rig, path string) {
	c.t.Helper()
	b := (&tftp.Request{Op: tftp.OpRRQ, Filename: path, Mode: "octet"}).Append(nil)
	if _, err := c.uni.WriteToUDPAddrPort(b, r.req); err != nil {
		c.t.Fatal(err)
	}
}

// read takes DATA from the group until the file is whole, n blocks have
// come (n > 0) or the group is silent for quiet.
func (c *client) read(n int, quiet time.Duration) { c.t.Helper(); c.listen(n, quiet, true) }

// listen is read, going on after the file is whole if untilWhole is false.
func (c *client) listen(n int, quiet time.Duration, untilWhole bool) {
	c.t.Helper()
	buf := make([]byte, 1500)
	for got := 0; n <= 0 || got < n; got++ {
		if untilWhole && c.whole() {
			return
		}
		c.mc.SetReadDeadline(time.Now().Add(quiet))
		m, _, err := c.mc.ReadFromUDPAddrPort(buf)
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return
		}
		if err != nil {
			c.t.Fatal(err)
		}
		if m < 4 || binary.BigEndian.Uint16(buf) != uint16(tftp.OpDATA) {
			c.t.Fatalf("group carried %x, want DATA", buf[:min(m, 16)])
		}
		blk := binary.BigEndian.Uint16(buf[2:])
		if c.first == 0 {
			c.first = blk
		}
		c.blocks[blk] = append([]byte(nil), buf[4:m]...)
		c.arrived = append(c.arrived, time.Now())
		if m-4 < BlockSize {
			c.last = int(blk)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *client) whole() bool { return c.last > 0 && len(c.blocks) == c.last }

func (c *client) file() []byte {
	var b []byte
	for i := 1; i <= c.last; i++ {
		b = append(b, c.blocks[uint16(i)]...)
	}
	return b
}

// unicast is the next datagram to the client's unicast socket.
func (c *client) unicast(wait time.Duration) (tftp.Packet, netip.AddrPort, error) {
	buf := make([]byte, 1500)
	c.uni.SetReadDeadline(time.Now().Add(wait))
	n, from, err := c.uni.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, from, err
	}
	p, err := tftp.ParsePacket(buf[:n])
	return p, from, err
}

func fileOf(b []byte) memFile { return memFile{bytes.NewReader(b), int64(len(b))} }

// TestJoinMidCycleGetsEveryBlock: a client that asks while the carousel
// is part way through the file gets the rest first, then the start, and
// ends up with every byte; its RRQ extends the run by one cycle from
// where it asked, no more, and the first client's file is whole too.
func TestJoinMidCycleGetsEveryBlock(t *testing.T) {
	kernel := content(300*BlockSize + 77) // 301 blocks
	r := newRig(t, memFS{"profiles/p/kernel": fileOf(kernel)}, 4<<20)
	a := r.client(t)
	a.rrq(r, "/profiles/p/kernel") // iPXE strips the slash; others may not
	a.read(100, 2*time.Second)
	b := r.client(t)
	b.rrq(r, "profiles/p/kernel")
	b.read(0, time.Second)
	a.listen(0, 200*time.Millisecond, false)
	for name, c := range map[string]*client{"first": a, "joiner": b} {
		if !c.whole() || !bytes.Equal(c.file(), kernel) {
			t.Errorf("%s client: %d blocks, last %d, whole %v, want the %d bytes", name, len(c.blocks), c.last, c.whole(), len(kernel))
		}
	}
	if b.first <= 100 {
		t.Errorf("the joiner's first block was %d, want one after the 100 the first client had", b.first)
	}
	st := r.srv.Stats()
	// The joiner asked after at least 100 blocks: a cycle from there, and
	// no more than the pacer's burst sent between its RRQ and the count.
	if st.Datagrams < 100+301 || st.Datagrams > uint64(b.first)+301+20 {
		t.Errorf("server sent %d datagrams, want 301 from the joiner's first block %d on (%d to %d)", st.Datagrams, b.first, 100+301, int(b.first)+301+20)
	}
	if st.Requests != 2 || st.Clients != 1 || st.Errors != 0 || st.Cycles != 1 {
		t.Errorf("stats %+v, want 2 requests from 1 address, no errors, 1 full cycle", st)
	}
	if want := uint64(st.Datagrams-301)*BlockSize + uint64(len(kernel)); st.Bytes != want {
		t.Errorf("sent %d file bytes, want %d", st.Bytes, want)
	}
}

// TestSecondRRQExtendsTheCycle: a client that lost blocks and asks again
// gets a full cycle from where the carousel was, so the run is one cycle
// plus what was sent before the second RRQ; then the carousel stops.
func TestSecondRRQExtendsTheCycle(t *testing.T) {
	kernel := content(64 * BlockSize) // 65 blocks, the last empty
	// Slow: a batch of 16 blocks every 137 ms, so the second RRQ lands
	// while the carousel is early in its cycle even on a loaded machine
	// (at 2 MiB/s a CI run's 18 ms delay let the whole cycle go first).
	r := newRig(t, memFS{"k": fileOf(kernel)}, 64<<10)
	a := r.client(t)
	a.rrq(r, "k")
	a.read(30, 2*time.Second)
	a.blocks = map[uint16][]byte{} // as if it had lost them all
	before := len(a.arrived)
	a.rrq(r, "k")
	a.read(0, 500*time.Millisecond)
	if !a.whole() || !bytes.Equal(a.file(), kernel) || a.last != 65 {
		t.Fatalf("after a second RRQ: %d blocks, last %d, want all 65 (the last empty)", len(a.blocks), a.last)
	}
	a.listen(0, 300*time.Millisecond, false)
	// Those already taken when it asked (a batch), then one cycle, then
	// silence.
	if after := len(a.arrived) - before; after < 65 || after > 65+sendBatch {
		t.Errorf("after the second RRQ the group carried %d datagrams, want one cycle of 65 (and a batch taken before it) and a stop", after)
	}
	if st := r.srv.Stats(); st.Datagrams > 30+65+sendBatch || st.Cycles != 1 {
		t.Errorf("stats %+v: want 1 full cycle, at most 65 datagrams after the 30 before the second RRQ (and a batch)", st)
	}
}

// TestOtherFileGetsError: while one file owns the group, an RRQ for
// another gets an ERROR by unicast from the data socket, and nothing of it
// reaches the group; a file too large for MTFTP's block numbers and a
// missing file are refused the same way.
func TestOtherFileGetsError(t *testing.T) {
	files := memFS{"k1": fileOf(content(1000)), "k2": fileOf(content(1000)),
		"big": zeroFile{65535 * BlockSize}, "fits": zeroFile{MaxSize}}
	tests := []struct {
		name, path string
		granted    string // owner before the RRQ
		code       tftp.ErrorCode
	}{
		{"not the owner", "k2", "k1", tftp.ErrCodeAccessViolation},
		{"65535 blocks of 512 or more", "big", "", tftp.ErrCodeAccessViolation},
		{"missing", "nope", "", tftp.ErrCodeFileNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, files, 4<<20)
			if tt.granted != "" && !r.srv.Grant(tt.granted, 1000) {
				t.Fatalf("Grant(%s) on a free group refused", tt.granted)
			}
			c := r.client(t)
			c.rrq(r, tt.path)
			p, from, err := c.unicast(2 * time.Second)
			if err != nil {
				t.Fatalf("no answer to RRQ %s: %v", tt.path, err)
			}
			e, ok := p.(*tftp.Error)
			if !ok || e.Code != tt.code {
				t.Fatalf("answer %#v, want ERROR code %d", p, tt.code)
			}
			if from.Port() == r.req.Port() {
				t.Errorf("ERROR came from the request port %d, want the data socket's", from.Port())
			}
			c.read(0, 200*time.Millisecond)
			if len(c.blocks) != 0 {
				t.Errorf("the group carried %d blocks after a refused RRQ", len(c.blocks))
			}
			if st := r.srv.Stats(); st.Errors != 1 || st.Datagrams != 0 {
				t.Errorf("stats %+v, want 1 error and no DATA", st)
			}
		})
	}
	t.Run("the owner is served", func(t *testing.T) {
		r := newRig(t, files, 4<<20)
		r.srv.Grant("fits", MaxSize)
		c := r.client(t)
		c.rrq(r, "fits")
		c.read(3, 2*time.Second)
		if len(c.blocks) != 3 {
			t.Fatalf("the owner of 65535 blocks: %d blocks heard, want DATA", len(c.blocks))
		}
	})
}

// TestPacingHoldsTheRate: the carousel's DATA, headers and Ethernet
// overhead counted, arrive no faster than the rate.
func TestPacingHoldsTheRate(t *testing.T) {
	const rate = 1 << 20
	kernel := content(512 * BlockSize)
	r := newRig(t, memFS{"k": fileOf(kernel)}, rate)
	c := r.client(t)
	c.rrq(r, "k")
	c.read(0, 2*time.Second)
	if !c.whole() {
		t.Fatalf("%d of 513 blocks", len(c.blocks))
	}
	took := c.arrived[len(c.arrived)-1].Sub(c.arrived[0])
	wire := float64(len(kernel) + len(c.arrived)*(4+mcast.WireOverhead))
	burst := float64(16 * (BlockSize + 4 + mcast.WireOverhead))
	got := (wire - burst) / took.Seconds()
	t.Logf("%d datagrams, %.0f wire bytes in %v: %.0f bytes/s after the burst, rate %d", len(c.arrived), wire, took, got, rate)
	if got > 1.05*rate || got < 0.7*rate {
		t.Errorf("sent at %.0f bytes/s, want %d (within -30%%..+5%%)", got, rate)
	}
}
