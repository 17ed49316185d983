package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/storm"
)

// TestStormRealWOL: bootfleet storm --real PROFILE powers on a profile's
// real machines (VMs woken through the stand-in NIC) in waves, follows
// their boot records and reports them in the simulator's table: every
// machine booted, each timed from its power-on, the phases filled in.
func TestStormRealWOL(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	data := filepath.Join(t.TempDir(), "data")
	startInventoryServer(t, e, lan, dir, data)
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log"), timeout: bootTimeout(t)}

	tap := map[string]string{}
	var macs []string
	for i := range 2 {
		m := fmt.Sprintf("52:54:00:e2:d0:%02x", i+1)
		macs = append(macs, m)
		tap[m] = fmt.Sprintf("tap%d", i)
		lan.addTap(t, tap[m])
		cli.run("machine", "add", "--mac", m, "--name", fmt.Sprintf("real%d", i+1), "--profile", labProfile)
	}
	// A machine of another profile stays off.
	cli.run("machine", "add", "--mac", "52:54:00:e2:d0:09", "--name", "other")
	nic := lan.addPeer(t, nicAddr+"/24")
	wakes := nicListener(t, nic, append(macs, "52:54:00:e2:d0:09"))

	start := time.Now()
	out, _ := runWaking(t, e, lan, dir, cli, wakes, tap, "storm", "--real", labProfile, "--wave", "1/3s",
		"--timeout", bootTimeout(t).String(), "-o", "json")
	var rep storm.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("storm --real -o json: %v in %s", err, out)
	}
	if rep.Clients != 2 || rep.Summary.Booted != 2 || rep.Summary.Failed != 0 {
		t.Fatalf("storm --real %s: %+v, want both machines booted", labProfile, rep.Summary)
	}
	wall := time.Since(start).Seconds()
	for _, m := range rep.Machines {
		if m.Result != "ok" || m.Boot <= 0 || m.Boot > wall || m.IP == "" || m.Phases.DHCP == nil || m.Phases.HTTP == nil || m.Phases.Done == nil {
			t.Errorf("machine %+v: want ok, a boot time from power-on within the run's %.0f s, its address and the dhcp, http and done phases", m, wall)
		}
	}
	if gap := rep.Machines[1].PowerOn - rep.Machines[0].PowerOn; gap < 2.5 || gap > 5 {
		t.Errorf("second power-on %.1f s after the first, want about 3 (--wave 1/3s)", gap)
	}
	select {
	case w := <-wakes:
		t.Fatalf("%s was woken; it is not in profile %s", w.mac, labProfile)
	default:
	}
	t.Logf("storm --real: boots %.1f s and %.1f s from power-on", rep.Machines[0].Boot, rep.Machines[1].Boot)
}
