package tftp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// mcTestClient behaves as iPXE's tftm:// does (src/net/udp/tftp.c, read
// for its behaviour): RRQ with blksize, tsize and an empty multicast
// option; DATA from the group or the unicast socket, filed by block
// number; as master, an ACK of its last in-sequence block after every
// DATA, after an OACK, and when DATA stops; as listener, silence. It
// closes both sockets once it has every block, like iPXE.
type mcTestClient struct {
	server *net.UDPAddr
	file   string
	// deafUntil, if set, makes the client deaf to blocks before it until
	// it is made master: a client that joined late.
	deafUntil uint64
	// quitAfter, if set, closes the client once it holds this many
	// blocks in sequence, without a word: a master that died.
	quitAfter uint64

	joined chan struct{} // closed at the first OACK

	got      map[uint64][]byte
	total    uint64
	size     int64
	masters  int // OACKs with mc=1
	finished bool
}

func (c *mcTestClient) contiguous() uint64 {
	n := uint64(0)
	for c.got[n+1] != nil {
		n++
	}
	return n
}

func (c *mcTestClient) data() []byte {
	var b bytes.Buffer
	for i := uint64(1); i <= c.total; i++ {
		b.Write(c.got[i])
	}
	return b.Bytes()
}

type mcPacket struct {
	b    []byte
	from *net.UDPAddr
}

func readInto(conn *net.UDPConn, ch chan<- mcPacket) {
	for {
		buf := make([]byte, 2048)
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			close(ch)
			return
		}
		ch <- mcPacket{buf[:n], from}
	}
}

// listenGroup opens a socket for group that other sockets in this
// process can open too, and joins it on loopback.
func listenGroup(t *testing.T, group netip.AddrPort) *net.UDPConn {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", group.String())
	if err != nil {
		t.Fatal(err)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := ipv4.NewPacketConn(pc.(*net.UDPConn)).JoinGroup(lo, &net.UDPAddr{IP: group.Addr().AsSlice()}); err != nil {
		t.Fatalf("join %v on lo: %v", group, err)
	}
	return pc.(*net.UDPConn)
}

func (c *mcTestClient) run(t *testing.T, ctx context.Context) error {
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer uc.Close()
	rrq := (&Request{Op: OpRRQ, Filename: c.file, Mode: "octet", Options: []Option{{"blksize", "1432"}, {"tsize", "0"}, {"multicast", ""}}}).Append(nil)
	uc.WriteToUDP(rrq, c.server)
	ch := make(chan mcPacket, 256)
	go readInto(uc, ch)
	var peer *net.UDPAddr
	var gc *net.UDPConn
	defer func() {
		if gc != nil {
			gc.Close()
		}
	}()
	master := false
	c.got = map[uint64][]byte{}
	blk := 512
	ack := func() {
		if master && peer != nil {
			uc.WriteToUDP((&Ack{Block: uint16(c.contiguous())}).Append(nil), peer)
		}
	}
	idle := time.NewTimer(300 * time.Millisecond)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w with %d of %d blocks (master %v)", c.file, ctx.Err(), len(c.got), c.total, master)
		case <-idle.C:
			if peer == nil {
				uc.WriteToUDP(rrq, c.server)
			}
			ack()
			idle.Reset(300 * time.Millisecond)
			continue
		case p, ok := <-ch:
			if !ok {
				return fmt.Errorf("%s: socket closed", c.file)
			}
			if peer == nil {
				peer = p.from
			}
			if p.from.String() != peer.String() {
				continue // iPXE's transfer-ID check
			}
			pkt, err := ParsePacket(p.b)
			if err != nil {
				return err
			}
			switch pkt := pkt.(type) {
			case *OAck:
				if c.joined != nil {
					close(c.joined)
					c.joined = nil
				}
				for _, o := range pkt.Options {
					switch o.Name {
					case "blksize":
						blk, _ = strconv.Atoi(o.Value)
					case "tsize":
						c.size, _ = strconv.ParseInt(o.Value, 10, 64)
						c.total = uint64(c.size)/uint64(blk) + 1
					case "multicast":
						m, err := parseMcastOption(o.Value)
						if err != nil {
							return err
						}
						master = m.master
						if master {
							c.masters++
						}
						if gc == nil && m.group.IsValid() {
							gc = listenGroup(t, m.group)
							gch := make(chan mcPacket, 256)
							go readInto(gc, gch)
							go func() {
								for p := range gch {
									select {
									case ch <- p:
									case <-ctx.Done():
										return
									}
								}
							}()
						}
					}
				}
				ack()
			case *Data:
				base := (c.contiguous() + 1) &^ 0xffff
				idx := base + uint64(pkt.Block)
				if idx < c.deafUntil && !master {
					continue
				}
				c.got[idx] = append([]byte(nil), pkt.Payload...)
				ack()
				if c.quitAfter > 0 && c.contiguous() >= c.quitAfter && master {
					return nil
				}
				if c.total > 0 && c.contiguous() == c.total {
					c.finished = true
					return nil
				}
			case *Error:
				return fmt.Errorf("%s: server sent ERROR %d %q", c.file, pkt.Code, pkt.Message)
			}
			idle.Reset(300 * time.Millisecond)
		}
	}
}

func mcastServer(t *testing.T, cfg Config) (net.Addr, *statsRecorder, *syncBuffer) {
	t.Helper()
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.MulticastPort = probe.LocalAddr().(*net.UDPAddr).Port // a port free here
	probe.Close()
	cfg.MulticastGroups = netip.MustParsePrefix("239.255.251.0/28")
	return startServer(t, cfg, func(s *Server) { s.mcastLoop = true })
}

var bytesSentRE = regexp.MustCompile(`multicast transfer done.* clients=(\d+) blocks=(\d+) bytes_sent=(\d+)`)

// sessionSent waits for the session's log line and returns the clients it
// served and the file bytes it sent to the group.
func sessionSent(t *testing.T, logs *syncBuffer) (clients, sent int) {
	t.Helper()
	var m []string
	waitFor(t, func() bool { m = bytesSentRE.FindStringSubmatch(logs.String()); return m != nil })
	clients, _ = strconv.Atoi(m[1])
	sent, _ = strconv.Atoi(m[3])
	return clients, sent
}

func TestMulticastSession(t *testing.T) {
	const size = 300*1432 + 77
	tests := []struct {
		name    string
		clients []*mcTestClient
		// sent bounds what the group carries, in file sizes.
		minSent, maxSent float64
		retries          int
	}{
		{name: "three at once", clients: []*mcTestClient{{}, {}, {}}, minSent: 1, maxSent: 1.5},
		// The second client missed the first half; made master, it gets
		// that half again (and what it missed joining: at most the rest).
		{name: "late joiner", clients: []*mcTestClient{{}, {deafUntil: 151}}, minSent: 1.45, maxSent: 2},
		// The master dies at block 100; once it stops answering the next
		// client takes over from where it is.
		{name: "master dies", clients: []*mcTestClient{{quitAfter: 100}, {}}, minSent: 1, maxSent: 1.4, retries: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newMapFS()
			want := randBytes(31, size)
			fsys.put("vmlinuz", want)
			addr, rec, logs := mcastServer(t, Config{FS: fsys, Timeout: 200 * time.Millisecond, Retries: tt.retries})
			ctx := testCtx(t, 30*time.Second)
			errs := make(chan error, len(tt.clients))
			// One after another, each once the one before joined, so the
			// first is the first master.
			for _, c := range tt.clients {
				c.server, c.file, c.joined = addr.(*net.UDPAddr), "vmlinuz", make(chan struct{})
				joined := c.joined
				go func() { errs <- c.run(t, ctx) }()
				select {
				case <-joined:
				case <-ctx.Done():
					t.Fatal("no OACK")
				}
			}
			for range tt.clients {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range tt.clients {
				if c.quitAfter > 0 {
					continue
				}
				if !bytes.Equal(c.data(), want) {
					t.Fatalf("client %d got %d bytes, not the file (%d bytes)", i, len(c.data()), len(want))
				}
			}
			clients, sent := sessionSent(t, logs)
			if clients != len(tt.clients) {
				t.Errorf("session served %d clients, want %d", clients, len(tt.clients))
			}
			if f := float64(sent) / size; f < tt.minSent || f > tt.maxSent {
				t.Errorf("group carried %d bytes, %.2f times the file; want %.1f..%.1f", sent, f, tt.minSent, tt.maxSent)
			}
			for range tt.clients {
				st := rec.next(t)
				if st.Group == "" {
					t.Errorf("stats for %v have no group: %+v", st.Remote, st)
				}
			}
			t.Logf("%d clients, group carried %.2f times the file", clients, float64(sent)/size)
		})
	}
}

// TestMulticastOffIsUnicast: a server without MulticastGroups ignores the
// option, and the client downloads by plain TFTP.
func TestMulticastOffIsUnicast(t *testing.T) {
	fsys := newMapFS()
	want := randBytes(32, 5000)
	fsys.put("f", want)
	addr, _, _ := startServer(t, Config{FS: fsys})
	got, err := newTestClient(addr).withOpts("blksize", "1432", "multicast", "").get(testCtx(t, 10*time.Second), "f")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get = %d bytes, %v; want the file", len(got), err)
	}
}
