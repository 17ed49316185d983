package dhcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// The captures in testdata/captures come from real firmware (see
// testdata/capture.sh). Each client request in them is fed through a full-mode
// and a proxy-mode server, and the replies are compared with
// testdata/golden/NAME.golden. UPDATE_TESTDATA=1 rewrites the golden files
// and the fuzz seed corpus.

var update = os.Getenv("UPDATE_TESTDATA") == "1"

// udpPacket is one UDP datagram from a capture.
type udpPacket struct {
	frame            int
	src, dst         net.IP
	srcPort, dstPort int
	payload          []byte
}

// readPcap reads a classic libpcap file with Ethernet framing and returns
// its IPv4 UDP datagrams. (pcapng is not supported; capture.sh asks tshark
// for -F pcap.)
func readPcap(path string) ([]udpPacket, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 24 {
		return nil, errors.New("file shorter than a pcap header")
	}
	var bo binary.ByteOrder
	switch magic := binary.LittleEndian.Uint32(b); magic {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("pcap magic %#x, want a classic pcap file (pcapng? convert with editcap -F pcap)", magic)
	}
	if lt := bo.Uint32(b[20:]); lt != 1 {
		return nil, fmt.Errorf("link type %d, want 1 (Ethernet)", lt)
	}
	var out []udpPacket
	frame := 0
	for off := 24; off+16 <= len(b); {
		incl := int(bo.Uint32(b[off+8:]))
		off += 16
		if incl < 0 || off+incl > len(b) {
			return nil, fmt.Errorf("record %d truncated", frame+1)
		}
		pkt := b[off : off+incl]
		off += incl
		frame++
		if len(pkt) < 14 {
			continue
		}
		et, l3 := binary.BigEndian.Uint16(pkt[12:]), pkt[14:]
		if et == 0x8100 && len(pkt) >= 18 {
			et, l3 = binary.BigEndian.Uint16(pkt[16:]), pkt[18:]
		}
		if et != 0x0800 || len(l3) < 20 || l3[9] != 17 {
			continue
		}
		ihl := int(l3[0]&0x0f) * 4
		if ihl < 20 || len(l3) < ihl+8 {
			continue
		}
		udp := l3[ihl:]
		ulen := int(binary.BigEndian.Uint16(udp[4:]))
		if ulen < 8 || ulen > len(udp) {
			continue
		}
		out = append(out, udpPacket{
			frame: frame, src: net.IP(l3[12:16]), dst: net.IP(l3[16:20]),
			srcPort: int(binary.BigEndian.Uint16(udp)), dstPort: int(binary.BigEndian.Uint16(udp[2:])),
			payload: udp[8:ulen],
		})
	}
	return out, nil
}

// capturedRequests returns the distinct client requests of a capture:
// retransmissions (same xid and message type) are kept once.
func capturedRequests(t testing.TB, path string) []udpPacket {
	t.Helper()
	pkts, err := readPcap(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	var out []udpPacket
	for _, p := range pkts {
		if p.dstPort != 67 && p.dstPort != 4011 {
			continue
		}
		m, err := dhcpv4.FromBytes(p.payload)
		if err != nil {
			t.Fatalf("%s frame %d: captured request does not decode: %v", path, p.frame, err)
		}
		k := m.TransactionID.String() + m.MessageType().String()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, p)
	}
	return out
}

// goldenServer mirrors the capture network (10.213.7.0/24, see capture.sh).
func goldenServer(t testing.TB, mode Mode) *Server {
	t.Helper()
	s, err := New(Config{
		Mode: mode, Interface: "br0", ServerIP: net.IPv4(10, 213, 7, 1), Netmask: net.CIDRMask(24, 32),
		RangeStart: net.IPv4(10, 213, 7, 100), RangeEnd: net.IPv4(10, 213, 7, 150),
		LeaseTime: time.Hour, Router: net.IPv4(10, 213, 7, 1), DNS: []net.IP{net.IPv4(10, 213, 7, 1)},
		LeaseStore: NewMemStore(),
		Plan:       pxe.PlanConfig{HTTPBase: "http://10.213.7.1:8080"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return t0 }
	return s
}

func TestGoldenCaptures(t *testing.T) {
	caps, err := filepath.Glob("testdata/captures/*.pcap")
	if err != nil || len(caps) == 0 {
		t.Fatalf("no captures in testdata/captures (%v); run testdata/capture.sh", err)
	}
	for _, c := range caps {
		name := strings.TrimSuffix(filepath.Base(c), ".pcap")
		t.Run(name, func(t *testing.T) {
			reqs := capturedRequests(t, c)
			if len(reqs) == 0 {
				t.Fatal("capture holds no client requests")
			}
			servers := []*Server{goldenServer(t, ModeFull), goldenServer(t, ModeProxy)}
			var sb strings.Builder
			for i, p := range reqs {
				m, _ := dhcpv4.FromBytes(p.payload)
				fmt.Fprintf(&sb, "=== request %d: frame %d, %v:%d -> %v:%d, %v, firmware %s\n",
					i+1, p.frame, p.src, p.srcPort, p.dst, p.dstPort, m.MessageType(), pxe.Detect(m).Firmware())
				sb.WriteString(m.Summary())
				for _, s := range servers {
					peer := &net.UDPAddr{IP: p.src, Port: p.srcPort}
					r, why := s.process(context.Background(), p.payload, peer, p.dstPort == 4011)
					if r.msg == nil {
						fmt.Fprintf(&sb, "--- %s mode: no reply (%s)\n", s.cfg.Mode, why)
						continue
					}
					// The reply must survive its own wire format.
					back, err := dhcpv4.FromBytes(r.msg.ToBytes())
					if err != nil {
						t.Fatalf("request %d: %s reply does not decode: %v", i+1, s.cfg.Mode, err)
					}
					// Invariants a careless UPDATE_TESTDATA must not bless.
					bf := string(back.Options.Get(dhcpv4.OptionBootfileName))
					if pxe.Detect(m).IPXE && bf != "" && !strings.HasPrefix(bf, "http://") {
						t.Errorf("request %d: iPXE handed %q by %s mode; it must get its script URL", i+1, bf, s.cfg.Mode)
					}
					if s.cfg.Mode == ModeProxy && !back.YourIPAddr.IsUnspecified() {
						t.Errorf("request %d: proxy reply assigns %v", i+1, back.YourIPAddr)
					}
					fmt.Fprintf(&sb, "--- %s mode: reply to %v\n%s", s.cfg.Mode, r.dest, back.Summary())
				}
				sb.WriteString("\n")
				if update {
					writeSeed(t, fmt.Sprintf("%s-%d", name, i+1), p.payload)
				}
			}
			compareGolden(t, filepath.Join("testdata", "golden", name+".golden"), sb.String())
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run UPDATE_TESTDATA=1 go test ./internal/dhcp/ to create it", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %q\nwant: %q\n(UPDATE_TESTDATA=1 rewrites it after review)", path, i+1, g, w)
			}
		}
	}
}

// writeSeed stores a packet in the native fuzz corpus format.
func writeSeed(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzHandle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(false)\n", b)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
