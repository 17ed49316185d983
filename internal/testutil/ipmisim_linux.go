package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// IPMISim is a running ipmi_sim from Debian's openipmi: a BMC that
// speaks IPMI v2.0 over LAN on UDP, whose chassis power runs a command
// (on: start it; off: kill it, after asking the VM connected to Serial to
// shut down) and reports on while that command lives.
type IPMISim struct {
	LAN      string // host:port, UDP
	Serial   string // host:port, TCP: QEMU's ipmi-bmc-extern chardev connects here
	User     string
	Password string
	Suite    int // a cipher suite it offers: ipmi_sim has no SHA-256 suites
	Proc     *Process
}

// StartIPMISim runs ipmi_sim on loopback with one admin user; startcmd is
// the path of an executable and its arguments, split at spaces (no shell:
// use a script for more). It skips without
// ipmi_sim unless under BOOTFLEET_CI.
func StartIPMISim(t testing.TB, startcmd string) *IPMISim {
	t.Helper()
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		SkipUnlessCI(t, "ipmi_sim is not installed (apt-get install openipmi, or scripts/deps.sh)")
	}
	dir := t.TempDir()
	s := &IPMISim{LAN: freeUDP(t), Serial: FreeAddr(t), User: "bootfleet", Password: "bmc-" + filepath.Base(dir), Suite: 3}
	lanHost, lanPort, _ := net.SplitHostPort(s.LAN)
	serHost, serPort, _ := net.SplitHostPort(s.Serial)
	conf := fmt.Sprintf(`name "bootfleet"
set_working_mc 0x20
  startlan 1
    addr %s %s
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  serial 15 %s %s codec VM
  startcmd %q
  startnow false
  poweroff_wait 3
  kill_wait 3
user 2 true %q %q admin 10 none md2 md5 straight
`, lanHost, lanPort, serHost, serPort, startcmd, s.User, s.Password)
	// A BMC whose management controller has chassis control (device
	// support 0x9f), as ipmi_sim's own example sets it up.
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nsel_enable 0x20 1000 0x0a\nmc_enable 0x20\n"
	for name, text := range map[string]string{"lan.conf": conf, "bmc.emu": emu} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	s.Proc = StartProcess(t, filepath.Join(dir, "ipmi_sim.log"), "ipmi_sim", "-n",
		"-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"), "-s", filepath.Join(dir, "state"))
	waitUDP(t, s.LAN, s.Proc)
	return s
}

// freeUDP is a loopback UDP address nothing listens on right now.
func freeUDP(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// waitUDP waits until a socket is bound to addr's port, as /proc/net/udp
// shows, or p exits.
func waitUDP(t testing.TB, addr string, p *Process) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	var n int
	fmt.Sscan(port, &n)
	want := fmt.Sprintf(":%04X ", n)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/net/udp")
		if strings.Contains(string(b), want) {
			return
		}
		select {
		case <-tick.C:
		case <-p.Exited:
			t.Fatalf("ipmi_sim exited at start:\n%s", p.LogTail(20))
		case <-deadline:
			t.Fatalf("ipmi_sim did not bind %s within 10 s:\n%s", addr, p.LogTail(20))
		}
	}
}
