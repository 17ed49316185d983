package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil/ipmisim"
)

// powerLine is one machine's line of bootfleet power -o json.
type powerLine struct {
	Name, MAC, Driver, State, Error string
	Wave                            int
}

// power runs bootfleet power ACTION on machines and returns each line;
// it does not fail the test when the command exits non-zero, since a
// machine's failure is what some steps check.
func (c *bootfleetCLI) power(action string, args ...string) ([]powerLine, error) {
	c.t.Helper()
	out, err := c.tryRun(append([]string{"power", action, "-o", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	var ls []powerLine
	if jerr := json.Unmarshal(out, &ls); jerr != nil {
		c.t.Fatalf("bootfleet power %s: %v in %s", action, jerr, out)
	}
	return ls, nil
}

// TestIPMIPower is IPMI's proof with a real BMC simulator: ipmi_sim, from
// Debian's openipmi, whose chassis power starts and kills a QEMU that
// connects back to it through ipmi-bmc-extern, as a server's BMC switches
// its host. bootfleet power on starts the VM, which network-boots to its
// DoneURL; status reads on while it boots; off stops a running VM; a wrong
// password is refused.
func TestIPMIPower(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	data := filepath.Join(t.TempDir(), "data")
	server := startInventoryServer(t, e, lan, dir, data)
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}

	const mac = "52:54:00:e2:b0:01"
	serial := filepath.Join(dir, "serial-"+strings.ReplaceAll(mac, ":", "-")+".log")
	script := filepath.Join(dir, "machine.sh")
	bmcPort := ipmisim.FreeTCP(t) // the simulator's serial (VM) port, for QEMU's chardev
	args := qemuArgs(t, e, vm{fw: bios, mac: mac, tap: "tap0", extra: []string{
		"-chardev", "socket,id=ipmi0,host=127.0.0.1,port=" + strings.Split(bmcPort, ":")[1] + ",reconnect=1",
		"-device", "ipmi-bmc-extern,chardev=ipmi0,id=bmc0", "-device", "isa-ipmi-kcs,bmc=bmc0"}})
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	text := fmt.Sprintf("#!/bin/sh\nexec qemu-system-x86_64 %s >>%s 2>&1 </dev/null\n", strings.Join(quoted, " "), serial)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := ipmisim.StartAt(t, script, bmcPort, "ip", "netns", "exec", lan.name)
	pw := filepath.Join(t.TempDir(), "bmc.pw")
	os.WriteFile(pw, []byte(sim.Password+"\n"), 0o600)

	cli.run("machine", "add", "--mac", mac, "--name", "bmc1")
	cli.run("machine", "power", "bmc1", "--driver", "ipmi", "--host", sim.LAN, "--user", sim.User,
		"--password-file", pw, "--cipher-suite", fmt.Sprint(sim.Suite))
	if out := string(cli.run("machine", "power", "bmc1")); strings.Contains(out, sim.Password) || !strings.Contains(out, "(set)") {
		t.Fatalf("machine power shows:\n%s\nwant the password as (set)", out)
	}

	state := func(action string) string {
		t.Helper()
		ls, err := cli.power(action, "bmc1")
		if err != nil {
			t.Fatalf("power %s: %v\n--- ipmi_sim ---\n%s", action, err, sim.LogTail(20))
		}
		if len(ls) != 1 || ls[0].Driver != "ipmi" {
			t.Fatalf("power %s answered %+v, want one ipmi line", action, ls)
		}
		return ls[0].State
	}
	if got := state("status"); got != "off" {
		t.Fatalf("status before power on: %q, want off", got)
	}
	start := time.Now()
	if got := state("on"); got != "on" {
		t.Fatalf("power on read back %q, want on", got)
	}
	if got := state("status"); got != "on" {
		t.Fatalf("status while the VM boots: %q, want on", got)
	}
	ctx, cancel := contextTimeout(bootTimeout(t))
	defer cancel()
	if _, err := server.waitLine(ctx, func(line string) (bool, error) {
		kv := parseLogfmt(line)
		return kv["msg"] == "boot complete" && sameMAC(kv["mac"], mac), nil
	}); err != nil {
		serialLog, _ := os.ReadFile(serial)
		t.Fatalf("the VM powered on through IPMI never called its DoneURL: %v\n--- console ---\n%s\n--- ipmi_sim ---\n%s",
			err, tail(string(serialLog), 30), sim.LogTail(20))
	}
	t.Logf("IPMI power on to DoneURL: %.1fs", time.Since(start).Seconds())
	var boots []struct {
		Power *struct{ Action, Cause string } `json:"power"`
	}
	cli.json(&boots, "boots", "--machine", mac)
	if len(boots) != 1 || boots[0].Power == nil || boots[0].Power.Action != "on" || !strings.HasPrefix(boots[0].Power.Cause, "api:") {
		t.Errorf("boot records of %s: %+v; want one, saying it followed the power on", mac, boots)
	}

	// The test image powers off after its DoneURL; the BMC sees its
	// machine go. Then on again, and off while it boots.
	waitState(t, cli, "off", 60*time.Second)
	if got := state("on"); got != "on" {
		t.Fatalf("second power on read back %q, want on", got)
	}
	// The check below sees QEMU when it runs: it does now.
	for deadline := time.Now().Add(10 * time.Second); len(processesWith("mac="+mac)) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("power on said on, but no QEMU for %s runs within 10 s", mac)
		}
		time.Sleep(100 * time.Millisecond) // polling /proc
	}
	if got := state("off"); got != "off" {
		t.Fatalf("power off of a booting VM read back %q, want off", got)
	}
	if pids := processesWith("mac=" + mac); len(pids) > 0 {
		t.Fatalf("power off said off but QEMU for %s still runs: pids %v", mac, pids)
	}

	os.WriteFile(pw, []byte("not-"+sim.Password+"\n"), 0o600)
	cli.run("machine", "power", "bmc1", "--driver", "ipmi", "--host", sim.LAN, "--user", sim.User, "--password-file", pw,
		"--cipher-suite", fmt.Sprint(sim.Suite))
	_, err := cli.power("status", "bmc1")
	if err == nil || !strings.Contains(err.Error(), "wrong user or password") {
		t.Fatalf("status with a wrong password: %v; want it refused, saying so", err)
	}
	if strings.Contains(err.Error(), sim.Password) {
		t.Fatalf("the refusal shows a password: %v", err)
	}
}

// waitState polls power status until the machine is in want.
func waitState(t *testing.T, cli *bootfleetCLI, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ls, err := cli.power("status", "bmc1")
		if err == nil && len(ls) == 1 && ls[0].State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("power status did not read %s within %s: %+v, %v", want, within, ls, err)
		}
		time.Sleep(time.Second) // polling a state, not ordering events
	}
}

// processesWith lists the PIDs whose command line holds s, from /proc.
func processesWith(s string) []string {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
