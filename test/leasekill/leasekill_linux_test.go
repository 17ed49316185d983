package leasekill

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// The network of the test: a /24 whose pool (151 addresses) holds every MAC
// of both phases, so "pool exhausted" never hides a lost lease.
const (
	serverIP   = "10.215.0.1"
	clientIP   = "10.215.0.2"
	poolRange  = "10.215.0.100-10.215.0.250"
	phase1MACs = 90 // MACs 0..89
	returning  = 45 // phase 2: MACs 0..44 (most ACKed before the kill) ...
	newMACs    = 45 // ... interleaved with MACs 90..134, never seen before
	killAfter  = 30 // ACKs seen in phase 1 before SIGKILL
	workers    = 8  // DORA exchanges in flight
)

// TestKill9DuringDORABurst is the proof that leases are durable: a
// lease is committed before its ACK goes out, so SIGKILL at any moment loses
// no ACKed lease, and the restarted server never hands an ACKed address to a
// second MAC.
//
// Note what it cannot prove: SIGKILL keeps the kernel's page cache, so a
// store that wrote but never fsynced would pass. The fsync half of
// durability rests on SQLite's synchronous=FULL (see internal/inventory/sqlite).
func TestKill9DuringDORABurst(t *testing.T) {
	needRoot(t)
	bin := testutil.BootfleetBinary(t)
	sns, cns, sdev, cdev := newLink(t)

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, sdev, data)
	srv := &server{t: t, bin: bin, ns: sns, cfg: cfg, dir: dir}

	conn, err := listenInNetns(cns, cdev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cl := newClient(conn)
	rec := &recorder{}

	// Lifetime 1: SIGKILL while exchanges are in flight.
	srv.start()
	ctx1, cancel1 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel1()
	done1 := make(chan int, 1)
	go func() { done1 <- cl.burst(ctx1, macRange(0, phase1MACs), workers, rec.add(1)) }()
	if !rec.waitFor(killAfter, 20*time.Second) {
		t.Fatalf("phase 1: only %d ACKs in 20 s, want %d before the kill; is the server answering?\n%s", rec.count(), killAfter, srv.LogTail(30))
	}
	srv.Kill9()
	atKill := rec.count()
	// ACKs already on the wire still arrive; they were sent, so they count.
	time.Sleep(300 * time.Millisecond)
	cancel1()
	<-done1
	if atKill >= phase1MACs {
		t.Fatalf("phase 1 finished (%d ACKs) before the kill; the kill must land mid-burst", atKill)
	}
	t.Logf("lifetime 1: SIGKILL after %d of %d DORAs were ACKed (%d ACKs in all)", atKill, phase1MACs, rec.count())
	checkStore(t, data, rec.lastByMAC(), "after SIGKILL #1")

	// Lifetime 2: same data dir; half the MACs return, half are new. The
	// new ones take the lowest free addresses, exactly those the MACs of
	// lifetime 1 hold: a lease lost in the kill shows up as a duplicate.
	srv.start()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel2()
	failed := cl.burst(ctx2, phase2(), workers, rec.add(2))
	srv.Kill9()
	if n := returning + newMACs; failed > n/10 {
		t.Fatalf("phase 2: %d of %d DORAs got no ACK; the test needs nearly all to mean anything\n%s", failed, n, srv.LogTail(30))
	}
	t.Logf("lifetime 2: %d DORAs, %d without ACK, then SIGKILL", returning+newMACs, failed)
	if n := rec.inBoth(); n < 10 {
		t.Fatalf("only %d MACs were ACKed in both lifetimes, want at least 10 to test returning machines", n)
	}

	checkAcks(t, rec.all())
	checkStore(t, data, rec.lastByMAC(), "after SIGKILL #2")
	if t.Failed() {
		t.Log(srv.LogTail(30))
	}
}

// checkAcks: across both lifetimes (1 h leases, none expired) an address was
// ACKed to one MAC only, and a MAC that returned got its address back.
func checkAcks(t *testing.T, acks []ack) {
	t.Helper()
	owner := map[string]ack{}
	first := map[string]ack{}
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, a := range acks {
		if o, ok := owner[a.ip]; ok && o.mac != a.mac {
			report("address %s ACKed to %s (lifetime %d) and to %s (lifetime %d) while the first lease was valid",
				a.ip, o.mac, o.phase, a.mac, a.phase)
		}
		owner[a.ip] = a
		if f, ok := first[a.mac]; !ok {
			first[a.mac] = a
		} else if f.ip != a.ip {
			report("%s was ACKed %s in lifetime %d but %s in lifetime %d: the restarted server forgot a valid lease",
				a.mac, f.ip, f.phase, a.ip, a.phase)
		}
	}
	if bad > 20 {
		t.Errorf("... %d ACK conflicts in all", bad)
	}
}

// checkStore opens the SQLite store the killed server left behind, as the
// next start would, and wants every ACKed lease in it and no address twice.
func checkStore(t *testing.T, data string, want map[string]string, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatalf("%s: open the store: %v", when, err)
	}
	defer st.Close()
	leases, err := st.ListLeases(ctx)
	if err != nil {
		t.Fatalf("%s: list leases: %v", when, err)
	}
	got := map[string]string{}
	byIP := map[string]string{}
	for _, l := range leases {
		mac, ip := l.MAC.String(), l.IP.String()
		if other, dup := byIP[ip]; dup {
			t.Errorf("%s: store holds %s for both %s and %s", when, ip, other, mac)
		}
		byIP[ip] = mac
		got[mac] = ip
	}
	missing := 0
	for _, mac := range sortedKeys(want) {
		if got[mac] != want[mac] {
			missing++
			if missing <= 10 {
				t.Errorf("%s: ACK %s -> %s is not in the store (store has %q)", when, mac, want[mac], got[mac])
			}
		}
	}
	if missing > 10 {
		t.Errorf("%s: ... %d ACKed leases missing in all", when, missing)
	}
	t.Logf("%s: store has %d leases, all %d ACKed ones present: %v", when, len(leases), len(want), missing == 0)
}

// recorder collects ACKs from all workers, in arrival order.
type recorder struct {
	mu   sync.Mutex
	acks []ack
}

func (r *recorder) add(phase int) func(net.HardwareAddr, net.IP) {
	return func(mac net.HardwareAddr, ip net.IP) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.acks = append(r.acks, ack{mac: mac.String(), ip: ip.String(), phase: phase, at: time.Now()})
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

func (r *recorder) all() []ack {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ack(nil), r.acks...)
}

// inBoth counts MACs ACKed in lifetime 1 and again in lifetime 2.
func (r *recorder) inBoth() int {
	seen := map[string]int{}
	for _, a := range r.all() {
		seen[a.mac] |= a.phase
	}
	n := 0
	for _, v := range seen {
		if v == 3 {
			n++
		}
	}
	return n
}

// lastByMAC is the address each MAC was last ACKed: what the store must hold.
func (r *recorder) lastByMAC() map[string]string {
	m := map[string]string{}
	for _, a := range r.all() {
		m[a.mac] = a.ip
	}
	return m
}

func (r *recorder) waitFor(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.count() >= n {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// macRange gives MACs 02:bf:00:00:HH:LL for i in [from, to): locally
// administered, unicast, and the same i is the same machine in every phase.
func macRange(from, to int) []net.HardwareAddr {
	var out []net.HardwareAddr
	for i := from; i < to; i++ {
		out = append(out, net.HardwareAddr{0x02, 0xbf, 0, 0, byte(i >> 8), byte(i)})
	}
	return out
}

// phase2 alternates new MACs with MACs of phase 1, so both kinds are in
// flight together from the first exchange on.
func phase2() []net.HardwareAddr {
	old, fresh := macRange(0, returning), macRange(phase1MACs, phase1MACs+newMACs)
	var out []net.HardwareAddr
	for i := range max(len(old), len(fresh)) {
		if i < len(fresh) {
			out = append(out, fresh[i])
		}
		if i < len(old) {
			out = append(out, old[i])
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// server is one `bootfleet serve` in the server namespace; start may be
// called again after kill9, on the same data directory.
type server struct {
	t        *testing.T
	bin, ns  string
	cfg, dir string
	n        int // lifetimes started
	*testutil.Process
}

func (s *server) start() {
	t := s.t
	t.Helper()
	s.n++
	s.Process = testutil.StartProcess(t, filepath.Join(s.dir, fmt.Sprintf("serve-%d.log", s.n)),
		"ip", "netns", "exec", s.ns, s.bin, "serve", "--config", s.cfg)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b := s.LogText()
		if strings.Contains(b, "dhcp serving") {
			return
		}
		select {
		case <-s.Exited:
			t.Fatalf("bootfleet (lifetime %d) exited before serving DHCP:\n%s", s.n, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("bootfleet (lifetime %d) did not log \"dhcp serving\" in 20 s:\n%s", s.n, s.LogTail(30))
}

func needRoot(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root: network namespaces, veth and port 67 need root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "ip (iproute2) not found in PATH"
	}
	if why == "" {
		return
	}
	testutil.SkipUnlessCI(t, why)
}

// newLink makes a server and a client namespace joined by a veth pair, both
// removed (with the pair) when the test ends, failed or not.
func newLink(t *testing.T) (sns, cns, sdev, cdev string) {
	t.Helper()
	id := os.Getpid()
	sns, cns = fmt.Sprintf("bf-lk-s-%d", id), fmt.Sprintf("bf-lk-c-%d", id)
	sdev, cdev = fmt.Sprintf("bflk%ds", id), fmt.Sprintf("bflk%dc", id)
	t.Cleanup(func() {
		for _, ns := range []string{sns, cns} {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, args := range [][]string{
		{"netns", "add", sns},
		{"netns", "add", cns},
		{"link", "add", sdev, "netns", sns, "type", "veth", "peer", "name", cdev, "netns", cns},
		{"-n", sns, "addr", "add", serverIP + "/24", "dev", sdev},
		{"-n", cns, "addr", "add", clientIP + "/24", "dev", cdev},
		{"-n", sns, "link", "set", "lo", "up"},
		{"-n", cns, "link", "set", "lo", "up"},
		{"-n", sns, "link", "set", sdev, "up"},
		{"-n", cns, "link", "set", cdev, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return sns, cns, sdev, cdev
}

// writeConfig writes a DHCP-only config: full mode, SQLite in data, 1 h
// leases (nothing expires during the test), TFTP off, placeholder iPXE
// binaries (serve pins them at start; nothing boots here).
func writeConfig(t *testing.T, dir, dev, data string) string {
	t.Helper()
	ipxe := filepath.Join(dir, "ipxe")
	if err := os.Mkdir(ipxe, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ipxe.efi", "undionly.kpxe"} {
		if err := os.WriteFile(filepath.Join(ipxe, f), []byte("placeholder"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	y := fmt.Sprintf(`interface: %s
server_ip: %s
data: %s
dhcp: {mode: full, range: %s, lease: 1h}
tftp: {listen: "off"}
http: {listen: "127.0.0.1:8080"}
ipxe: {dir: %s}
log: {level: info}
`, dev, serverIP, data, poolRange, ipxe)
	p := filepath.Join(dir, "bootfleet.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
