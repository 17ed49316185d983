package ipmi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/testutil/ipmisim"
)

func target(host, user, password string, suite int) power.Target {
	return power.Target{Machine: inventory.Machine{MAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}, Name: "pc1"},
		Settings: inventory.PowerSettings{Driver: "ipmi", Host: host, User: user, Password: password, CipherSuite: suite}}
}

func do(t *testing.T, tg power.Target, a power.Action) (power.State, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Driver{}.Do(ctx, tg, a)
}

// TestAgainstIPMISim drives Debian's BMC simulator: its chassis power
// runs a command that writes a file while it lives, so the test sees the
// "machine" itself start and stop, not only what the BMC says.
func TestAgainstIPMISim(t *testing.T) {
	dir := t.TempDir()
	alive, script := filepath.Join(dir, "alive"), filepath.Join(dir, "machine.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+alive+"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := ipmisim.Start(t, script)
	good := target(sim.LAN, sim.User, sim.Password, sim.Suite)

	steps := []struct {
		a    power.Action
		want power.State
	}{
		{power.Status, power.StateOff},
		{power.On, power.StateOn},
		{power.Status, power.StateOn},
		{power.Off, power.StateOff},
		{power.Cycle, power.StateOn}, // cycling a machine that is off powers it on
		{power.Off, power.StateOff},
	}
	for _, s := range steps {
		got, err := do(t, good, s.a)
		if err != nil || got != s.want {
			t.Fatalf("%s: %q, %v; want %s\nipmi_sim log:\n%s", s.a, got, err, s.want, sim.LogTail(20))
		}
		if s.a == power.On {
			waitFile(t, alive)
		}
	}

	for _, tt := range []struct {
		name string
		tg   power.Target
		want string
	}{
		{"wrong password", target(sim.LAN, sim.User, "not-"+sim.Password, sim.Suite), "wrong user or password"},
		{"unknown user", target(sim.LAN, "mallory", sim.Password, sim.Suite), "wrong user or password"},
		{"suite not offered", target(sim.LAN, sim.User, sim.Password, 17), "refused cipher suite 17"},
	} {
		_, err := do(t, tt.tg, power.Status)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error saying %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), sim.Password) {
			t.Errorf("%s: the error holds the password: %v", tt.name, err)
		}
	}
}

// waitFile waits for the simulator's child to create path: ipmi_sim says
// on once it has forked, before the child runs.
func waitFile(t *testing.T, path string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("power on said on but the BMC's command did not start within 10 s")
		}
	}
}

// TestUnreachableBMC: nothing answers, and the driver gives up by its
// context's deadline with an error that says so.
func TestUnreachableBMC(t *testing.T) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // bound, silent: a BMC that is down
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = Driver{Attempt: 200 * time.Millisecond}.Do(ctx, target(c.LocalAddr().String(), "u", "p", 3), power.Status)
	if err == nil || !strings.Contains(err.Error(), "no answer from the BMC") {
		t.Fatalf("silent BMC: %v; want an error saying it did not answer", err)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("the driver took %s, past its 2 s context", took)
	}
}

func TestSplitHost(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.9": "10.0.0.9:623", "bmc:6230": "bmc:6230", "[fd00::9]:623": "fd00::9:623"} {
		h, p, err := splitHost(in)
		if err != nil || h+":"+itoa(p) != want {
			t.Errorf("splitHost(%q) = %s, %d, %v; want %s", in, h, p, err, want)
		}
	}
	if _, _, err := splitHost("bmc:99999"); err == nil {
		t.Error("splitHost accepted port 99999")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
