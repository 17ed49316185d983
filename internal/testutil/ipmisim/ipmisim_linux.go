package ipmisim

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Sim is a running ipmi_sim from Debian's openipmi: a BMC that
// speaks IPMI v2.0 over LAN on UDP, whose chassis power runs a command
// (on: start it; off: kill it, after asking the VM connected to Serial to
// shut down) and reports on while that command lives.
type Sim struct {
	LAN      string // host:port, UDP
	Serial   string // host:port, TCP: QEMU's ipmi-bmc-extern chardev connects here
	User     string
	Password string
	Suite    int    // a cipher suite it offers: ipmi_sim has no SHA-256 suites
	Log      string // ipmi_sim's output
	exited   chan struct{}
}

// Start runs ipmi_sim on loopback with one admin user; startcmd is
// the path of an executable and its arguments, split at spaces (no shell:
// use a script for more). prefix, when given, wraps the command, e.g. ip
// netns exec NS to run the simulator and its machine in a namespace. It
// skips without ipmi_sim unless under BOOTFLEET_CI.
func Start(t testing.TB, startcmd string, prefix ...string) *Sim {
	t.Helper()
	return StartAt(t, startcmd, FreeTCP(t), prefix...)
}

// StartAt is Start with the VM serial port at serial
// (host:port), which the caller has already given to QEMU.
func StartAt(t testing.TB, startcmd, serial string, prefix ...string) *Sim {
	t.Helper()
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		const why = "ipmi_sim is not installed (apt-get install openipmi, or scripts/deps.sh)"
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatalf("BOOTFLEET_CI=1 but %s", why)
		}
		t.Skipf("%s (BOOTFLEET_CI=1 turns this skip into a failure)", why)
	}
	dir := t.TempDir()
	s := &Sim{LAN: freeUDP(t), Serial: serial, User: "bootfleet", Password: "bmc-" + filepath.Base(dir), Suite: 3}
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
	cmd := append(append([]string(nil), prefix...), "ipmi_sim", "-n",
		"-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"), "-s", filepath.Join(dir, "state"))
	s.Log = filepath.Join(dir, "ipmi_sim.log")
	s.start(t, cmd)
	s.waitUDP(t, prefix)
	return s
}

// start runs cmd in its own process group, which dies with the test (at
// cleanup, or with the test binary through Pdeathsig), and the machine
// the simulator started with it.
func (s *Sim) start(t testing.TB, cmd []string) {
	f, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdout, c.Stderr = f, f
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		t.Fatalf("start ipmi_sim: %v", err)
	}
	s.exited = make(chan struct{})
	go func() { c.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-s.exited
	})
}

// LogTail is the last n lines of ipmi_sim's output.
func (s *Sim) LogTail(n int) string {
	b, _ := os.ReadFile(s.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return s.Log + ":\n" + strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// FreeTCP is a loopback TCP address nothing listens on right now.
func FreeTCP(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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

// waitUDP waits until a socket is bound to the LAN port, as /proc/net/udp
// (read through prefix, in the simulator's namespace) shows, or the
// simulator exits.
func (s *Sim) waitUDP(t testing.TB, prefix []string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.LAN)
	var n int
	fmt.Sscan(port, &n)
	want := fmt.Sprintf(":%04X ", n)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		cat := append(append([]string(nil), prefix...), "cat", "/proc/net/udp")
		b, _ := exec.Command(cat[0], cat[1:]...).Output()
		if strings.Contains(string(b), want) {
			return
		}
		select {
		case <-tick.C:
		case <-s.exited:
			t.Fatalf("ipmi_sim exited at start:\n%s", s.LogTail(20))
		case <-deadline:
			t.Fatalf("ipmi_sim did not bind %s within 10 s:\n%s", s.LAN, s.LogTail(20))
		}
	}
}
