package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/wol"
)

// wake is a magic packet the stand-in NIC accepted.
type wake struct {
	mac string
	at  time.Time
}

// nicListener stands in for the NICs of the LAN's machines, since QEMU
// cannot wake from a magic packet: it reads UDP port 9 in a namespace of
// its own wired to the LAN's bridge, as a machine on it would, and
// reports each valid magic packet for one of macs, once per MAC. Invalid
// packets and other MACs are dropped and logged.
func nicListener(t *testing.T, lan *netns, macs []string) <-chan wake {
	t.Helper()
	var c net.PacketConn
	if err := inNetns(lan, func() (err error) {
		c, err = net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", wol.Port))
		return err
	}); err != nil {
		t.Fatalf("listen for magic packets: %v", err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		c.Close()
		<-exited // no log line after the test has ended
	})
	want := map[string]bool{}
	for _, m := range macs {
		want[m] = true
	}
	out := make(chan wake, len(macs))
	go func() {
		defer close(exited)
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				close(out)
				return
			}
			p, err := wol.Decode(buf[:n])
			switch {
			case err != nil:
				t.Logf("nic: dropped %d bytes from %v: %v", n, from, err)
			case !want[p.MAC.String()]:
				t.Logf("nic: magic packet for %s, no machine of this test", p.MAC)
			default:
				delete(want, p.MAC.String())
				out <- wake{p.MAC.String(), time.Now()}
			}
		}
	}()
	return out
}

// TestWOLWaves: bootfleet power on --all --wave 2/5s wakes six machines by
// Wake-on-LAN in three steps. A listener stands in for their NICs and
// starts each VM when, and only when, it sees a valid magic packet for its
// MAC; a seventh machine, never powered, and a broken packet start
// nothing. Every boot's record says it followed the power command, and
// the records' power times fall in three waves 5 s apart.
func TestWOLWaves(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	data := filepath.Join(t.TempDir(), "data")
	server := startInventoryServer(t, e, lan, dir, data)
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}

	var macs []string
	for i := range 7 {
		macs = append(macs, fmt.Sprintf("52:54:00:e2:c0:%02x", i+1))
	}
	nic := lan.addPeer(t, nicAddr+"/24")
	wakes := nicListener(t, nic, macs)
	for i, m := range macs[:6] {
		lan.addTap(t, fmt.Sprintf("tap%d", i))
		cli.run("machine", "add", "--mac", m, "--name", fmt.Sprintf("wol%d", i+1))
	}
	// A broken packet (one byte short) for the first machine wakes nothing.
	bad, _ := wol.Encode(mustMAC(t, macs[0]), nil)
	if err := inNetns(lan, func() error {
		c, err := net.Dial("udp4", net.JoinHostPort(nicAddr, fmt.Sprint(wol.Port)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(bad[:len(bad)-1])
		return err
	}); err != nil {
		t.Fatal(err)
	}

	tap := map[string]string{}
	for i, m := range macs[:6] {
		tap[m] = fmt.Sprintf("tap%d", i)
	}
	out, vms := runWaking(t, e, lan, dir, cli, wakes, tap, "power", "on", "--all", "--wave", "2/5s", "-o", "json")
	var lines []powerLine
	if err := json.Unmarshal(out, &lines); err != nil {
		t.Fatalf("power on -o json: %v in %s", err, out)
	}
	wave := map[string]int{}
	for _, l := range lines {
		if l.State != "sent" || l.Driver != "wol" {
			t.Errorf("power on line %+v, want sent by wol", l)
		}
		wave[l.MAC] = l.Wave
	}
	if len(wave) != 6 {
		t.Fatalf("power on answered for %d machines, want the six added: %s", len(wave), out)
	}

	for m, q := range vms {
		ctx, cancel := contextTimeout(bootTimeout(t))
		_, err := q.waitLine(ctx, func(line string) (bool, error) {
			if err := consoleFailure(line); err != nil {
				return false, err
			}
			return strings.HasPrefix(line, "BOOTFLEET-DONE"), nil
		})
		cancel()
		if err != nil {
			t.Fatalf("%s, woken by Wake-on-LAN, did not boot: %v\n%s", m, err, q.out.tail(30))
		}
	}
	// The seventh machine's NIC never saw its packet.
	select {
	case w := <-wakes:
		t.Fatalf("a magic packet for %s arrived; it was never powered on", w.mac)
	default:
	}

	// Each boot's record names the power command; its time is the wave's.
	var boots []struct {
		MAC   string `json:"mac"`
		State string `json:"state"`
		Start time.Time
		Power *struct {
			Time   time.Time
			Action string
			Cause  string
		} `json:"power"`
	}
	waitRecords(t, cli, &boots, 6)
	first := map[int]time.Time{}
	for _, b := range boots {
		if b.Power == nil || b.Power.Action != "on" || !strings.HasPrefix(b.Power.Cause, "api:") {
			t.Fatalf("boot of %s: power %+v, want the power on by an API token", b.MAC, b.Power)
		}
		if b.Start.Before(b.Power.Time) {
			t.Errorf("boot of %s started at %v, before its power on at %v", b.MAC, b.Start, b.Power.Time)
		}
		k := wave[b.MAC]
		if f, ok := first[k]; !ok || b.Power.Time.Before(f) {
			first[k] = b.Power.Time
		}
	}
	var waves []int
	for k := range first {
		waves = append(waves, k)
	}
	sort.Ints(waves)
	if fmt.Sprint(waves) != "[1 2 3]" {
		t.Fatalf("boot records in waves %v, want three: 1, 2, 3 (%+v)", waves, boots)
	}
	for _, b := range boots {
		if d := b.Power.Time.Sub(first[wave[b.MAC]]); d > 2*time.Second {
			t.Errorf("%s powered %s after the first of its wave %d, want together", b.MAC, d, wave[b.MAC])
		}
	}
	for k := 2; k <= 3; k++ {
		if gap := first[k].Sub(first[k-1]); gap < 4500*time.Millisecond || gap > 7*time.Second {
			t.Errorf("wave %d powered on %s after wave %d, want about 5 s", k, gap, k-1)
		}
	}
	t.Logf("waves powered at +0, +%.1fs, +%.1fs", first[2].Sub(first[1]).Seconds(), first[3].Sub(first[1]).Seconds())
	if err := server.alive(); err != nil {
		t.Fatal(err)
	}
}

// runWaking runs bootfleet args in the background and, until it has
// ended and every machine of tap has woken, starts the VM of each machine
// the stand-in NIC sees a magic packet for, on its tap. It returns the
// command's output and the VMs.
func runWaking(t *testing.T, e *env, lan *netns, dir string, cli *bootfleetCLI, wakes <-chan wake, tap map[string]string,
	args ...string) ([]byte, map[string]*proc) {
	t.Helper()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := cli.tryRun(args...)
		done <- result{out, err}
	}()
	vms := map[string]*proc{}
	var res *result
	timeout := time.After(bootTimeout(t))
	for res == nil || len(vms) < len(tap) {
		select {
		case w, ok := <-wakes:
			if !ok {
				t.Fatal("the stand-in NIC's socket closed")
			}
			if tap[w.mac] == "" {
				t.Fatalf("a magic packet woke %s, which was never powered on", w.mac)
			}
			vms[w.mac] = startVM(t, e, lan, dir, vm{fw: bios, mac: w.mac, tap: tap[w.mac]})
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s: %v", strings.Join(args, " "), r.err)
			}
			res = &r
		case <-timeout:
			t.Fatalf("after %s: %d of %d machines woken, command done %t", bootTimeout(t), len(vms), len(tap), res != nil)
		}
	}
	return res.out, vms
}

// waitRecords reads bootfleet boots until n complete records are there:
// a record is written when its boot ends, just after the DoneURL.
func waitRecords(t *testing.T, cli *bootfleetCLI, out any, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b := cli.run("boots", "--limit", "100", "-o", "json")
		var probe []struct{ State string }
		json.Unmarshal(b, &probe)
		complete := 0
		for _, p := range probe {
			if p.State == "complete" {
				complete++
			}
		}
		if complete >= n || time.Now().After(deadline) {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatal(err)
			}
			if complete < n {
				t.Fatalf("%d complete boot records after 30 s, want %d:\n%s", complete, n, b)
			}
			return
		}
		time.Sleep(time.Second) // polling the server's records
	}
}

// nicAddr is the stand-in NIC's namespace on the LAN.
const nicAddr = "10.213.0.250"

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}
