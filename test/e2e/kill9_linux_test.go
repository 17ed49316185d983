package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// TestKill9UnderLoad: bootfleet is killed with SIGKILL while 40 machines
// boot at once (DHCP, TFTP, iPXE script and kernel over HTTP, NBD root,
// DoneURL), then started again on the same data directory. The database
// must pass SQLite's integrity check, every lease a machine was ACKed is
// still there with its address and none is doubled, every boot that
// completed more than twice the history's flush interval before the kill
// is listed complete, and machines booting after the restart get
// addresses nobody holds.
func TestKill9UnderLoad(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Fatal("sqlite3 is missing; run scripts/deps.sh (Debian package sqlite3)")
	}
	s := newStormLAN(t)
	const killAfter = 6 * time.Second // the ramp spreads power-on over 8 s: many machines mid-boot
	killed := make(chan time.Time, 1)
	kill := time.AfterFunc(killAfter, func() {
		syscall.Kill(-s.server.cmd.Process.Pid, syscall.SIGKILL)
		killed <- time.Now()
	})
	defer kill.Stop()
	// The storm is interrupted once the server is dead, so machines
	// waiting on it give up at once instead of at their timeouts.
	rep, _ := s.runInterrupted(t, killAfter+5*time.Second, "--firmware", "uefi", "-n", "40", "--ramp", "8s", "--mac-prefix", "02:bf:e9")
	var killedAt time.Time
	select {
	case killedAt = <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the storm ended before the kill; the test must kill mid-flight")
	}
	select {
	case <-s.server.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("bootfleet still running 10 s after SIGKILL")
	}
	acked, completed := map[string]string{}, map[string]bool{}
	for _, m := range rep.Machines {
		if m.IP != "" {
			acked[strings.ToLower(m.MAC)] = m.IP
		}
	}
	lines, times := s.server.out.snapshotAll()
	for i, line := range lines {
		kv := parseLogfmt(line)
		if kv["msg"] == "boot complete" && times[i].Before(killedAt.Add(-2*time.Second)) {
			completed[strings.ToLower(kv["mac"])] = true
		}
	}
	if len(acked) == 0 || len(completed) == 0 || len(completed) == len(rep.Machines) {
		t.Fatalf("%d machines ACKed and %d boots completed 2 s before the kill of %d: the kill must come mid-storm, after some boots completed",
			len(acked), len(completed), len(rep.Machines))
	}
	t.Logf("killed %v into the storm: %d of %d machines had a lease, %d boots complete 2 s before", killAfter, len(acked), len(rep.Machines), len(completed))

	dir := restartAfterKill(t, s, stormConfig)
	cli := &bootfleetCLI{t: t, e: s.e, ns: s.lan, data: s.data, log: filepath.Join(dir, "cli.log")}
	leases := checkLeases(t, cli)
	for mac, ip := range acked {
		if leases[mac] != ip {
			t.Errorf("%s was ACKed %s before the kill; after the restart its lease is %q", mac, ip, leases[mac])
		}
	}
	var boots []struct{ MAC, State string }
	cli.json(&boots, "boots", "--limit", "500")
	complete := map[string]bool{}
	for _, b := range boots {
		if b.State == "complete" {
			complete[strings.ToLower(b.MAC)] = true
		}
	}
	for mac := range completed {
		if !complete[mac] {
			t.Errorf("%s completed its boot before the kill; after the restart bootfleet boots has no complete boot of it", mac)
		}
	}
	// The restarted server leases on: new machines get addresses no
	// surviving lease holds.
	after, _ := s.run(t, "--firmware", "ipxe", "-n", "5", "--ramp", "1s", "--mac-prefix", "02:bf:ea")
	if after.Summary.Booted != 5 {
		t.Fatalf("after the restart %d of 5 machines booted: %+v", after.Summary.Booted, after.Summary.Failures)
	}
	held := map[string]string{}
	for mac, ip := range leases {
		held[ip] = mac
	}
	for _, m := range after.Machines {
		if other, ok := held[m.IP]; ok && other != strings.ToLower(m.MAC) {
			t.Errorf("%s got %s after the restart, which %s held", m.MAC, m.IP, other)
		}
	}
	checkLeases(t, cli)
	for _, bad := range []string{"damaged", "repair", "level=ERROR"} {
		if line, _, ok := s.server.out.firstMatch(bad); ok {
			t.Errorf("the restarted server logged: %s", line)
		}
	}
}

// restartAfterKill checks that the killed server's SQLite store passes
// its integrity check, then starts the server again on the same data
// directory with config, its log in the returned directory.
func restartAfterKill(t *testing.T, s *stormLAN, config *template.Template) string {
	t.Helper()
	db := filepath.Join(s.data, "inventory.db")
	out, err := exec.Command("sqlite3", db, "PRAGMA integrity_check;").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("integrity_check of %s after kill -9: %v: %s", db, err, out)
	}
	dir := filepath.Join(s.dir, "restart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.server = startBootfleetConfig(t, s.e, s.lan, dir, config, map[string]string{"Data": s.data})
	return dir
}

// checkLeases returns the stored leases by MAC, failing t if an address
// or a MAC appears twice.
func checkLeases(t *testing.T, cli *bootfleetCLI) map[string]string {
	t.Helper()
	var ls []struct{ MAC, IP string }
	cli.json(&ls, "lease", "list")
	byMAC, byIP := map[string]string{}, map[string]string{}
	for _, l := range ls {
		mac := strings.ToLower(l.MAC)
		if ip, dup := byMAC[mac]; dup {
			t.Errorf("%s holds two leases, %s and %s", mac, ip, l.IP)
		}
		if other, dup := byIP[l.IP]; dup {
			t.Errorf("%s is leased to both %s and %s", l.IP, other, mac)
		}
		byMAC[mac], byIP[l.IP] = l.IP, mac
	}
	return byMAC
}
