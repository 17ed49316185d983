package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bootTimeout bounds one VM from QEMU start to BOOTFLEET-DONE. Under TCG an
// idle 2-core machine boots OVMF in about 65 s and SeaBIOS in about 35 s; at a
// load average of 50+ both took up to 170 s, hence the margin.
func bootTimeout(t testing.TB) time.Duration {
	if s := os.Getenv("BOOTFLEET_E2E_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("BOOTFLEET_E2E_TIMEOUT: want a Go duration like 300s, got %q", s)
		}
		return d
	}
	return 300 * time.Second
}

// parallelVM lets t run beside one other such test (make test passes
// -parallel 2) once the serial tests are done: t boots one TCG VM at a
// time, which keeps one of the two cores busy, so two such tests at once
// take about the time of one. Tests that boot several VMs at once, kill
// servers or measure the host's throughput stay serial.
// BOOTFLEET_E2E_SERIAL=1 runs every test alone, for per-test timings.
func parallelVM(t *testing.T) {
	if os.Getenv("BOOTFLEET_E2E_SERIAL") != "1" {
		t.Parallel()
	}
}

// artifactDir returns a fresh test/e2e/artifacts/<test name>/ (gitignored),
// kept after the run so CI can upload it.
func artifactDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("artifacts", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func contains(s string) func(string) (bool, error) {
	return func(line string) (bool, error) { return strings.Contains(line, s), nil }
}

// bootResult is what a finished boot proved.
type bootResult struct {
	cmdline  string        // the kernel command line the VM printed
	lease    string        // the BOOTFLEET-IP line: address and DHCP server
	wall     time.Duration // QEMU start to BOOTFLEET-DONE
	reported string        // seconds= from bootfleet's "boot complete" line
}

// boot starts the VM and waits for its init to call the DoneURL (serial
// BOOTFLEET-DONE) and for bootfleet to log "boot complete" for its MAC.
// On failure it prints the tails of the console and the server log.
func boot(t *testing.T, e *env, ns *netns, dir string, server *proc, v vm) bootResult {
	t.Helper()
	start := time.Now()
	qemu := startVM(t, e, ns, dir, v)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s boot of %s: %s\n--- console (last 40 lines) ---\n%s\n--- %s (last 40 lines) ---\n%s\n--- artifacts in %s",
			v.fw, v.mac, fmt.Sprintf(format, args...), qemu.out.tail(40), server.name, server.out.tail(40), dir)
	}

	ctx, cancel := contextTimeout(v.waitFor(t))
	defer cancel()
	// The server dying mid-boot is an answer too; don't wait out the timeout.
	go func() {
		select {
		case <-server.exited:
			cancel()
		case <-ctx.Done():
		}
	}()

	var res bootResult
	_, err := qemu.waitLine(ctx, func(line string) (bool, error) {
		switch {
		case strings.HasPrefix(line, "BOOTFLEET-CMDLINE: "):
			res.cmdline = strings.TrimPrefix(line, "BOOTFLEET-CMDLINE: ")
		case strings.HasPrefix(line, "BOOTFLEET-IP: "):
			res.lease = strings.TrimPrefix(line, "BOOTFLEET-IP: ")
		}
		if err := consoleFailure(line); err != nil {
			return false, err
		}
		return strings.HasPrefix(line, "BOOTFLEET-DONE"), nil
	})
	if err != nil {
		if serr := server.alive(); serr != nil {
			err = serr
		}
		fail("waiting for BOOTFLEET-DONE on the console: %v (after %v)", err, time.Since(start).Round(time.Second))
	}
	res.wall = time.Since(start)

	// The VM saw 200 from the DoneURL, so the log line is already written.
	lctx, lcancel := contextTimeout(10 * time.Second)
	defer lcancel()
	line, err := server.waitLine(lctx, func(line string) (bool, error) {
		kv := parseLogfmt(line)
		return kv["msg"] == "boot complete" && sameMAC(kv["mac"], v.mac), nil
	})
	if err != nil {
		fail(`the VM called its DoneURL but bootfleet logged no "boot complete" for mac=%s: %v`, v.mac, err)
	}
	res.reported = parseLogfmt(line)["seconds"]
	if _, err := strconv.ParseFloat(res.reported, 64); err != nil {
		fail("boot complete line has seconds=%q, want a number: %s", res.reported, line)
	}

	// init powers off right after BOOTFLEET-DONE; reap QEMU so the next VM
	// does not compete with it for the CPU.
	select {
	case <-qemu.exited:
	case <-time.After(15 * time.Second):
		qemu.stop()
	}
	t.Logf("%s %s: BOOTFLEET-DONE after %.1fs wall; bootfleet reports seconds=%s; lease %s",
		v.fw, v.mac, res.wall.Seconds(), res.reported, res.lease)
	return res
}

// consoleFailure returns why the boot failed if a console line proves it
// did, so waiting on is pointless; nil otherwise.
func consoleFailure(line string) error {
	switch {
	case strings.HasPrefix(line, "BOOTFLEET-FAIL"):
		return errors.New("the VM's init gave up")
	case strings.Contains(line, "Kernel panic"):
		return errors.New("kernel panic")
	case strings.Contains(line, "No bootable device"):
		return errors.New("SeaBIOS found nothing to boot (iPXE gave up)")
	case strings.HasPrefix(line, "Shell>"):
		return errors.New("OVMF fell through to the EFI shell (network boot failed)")
	}
	return nil
}

// checkProfile fails t unless cmdline carries profile's marker and a DoneURL
// pointing at the server.
func checkProfile(t *testing.T, cmdline, profile string) {
	t.Helper()
	words := strings.Fields(cmdline)
	has := func(w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	if !has(profileMarker(profile)) {
		t.Errorf("kernel command line %q: want %s (profile %q)", cmdline, profileMarker(profile), profile)
	}
	for _, other := range []string{defaultProfile, specialProfile} {
		if other != profile && has(profileMarker(other)) {
			t.Errorf("kernel command line %q has %s; the machine should boot profile %q", cmdline, profileMarker(other), profile)
		}
	}
	want := "done=http://" + serverIP + ":8080/"
	found := false
	for _, w := range words {
		found = found || strings.HasPrefix(w, want)
	}
	if !found {
		t.Errorf("kernel command line %q: want a DoneURL starting %s", cmdline, want)
	}
}

func sameMAC(a, b string) bool {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", ":")) }
	return a != "" && norm(a) == norm(b)
}

var logfmtPair = regexp.MustCompile(`([A-Za-z0-9_.]+)=("(?:[^"\\]|\\.)*"|\S*)`)

// parseLogfmt reads the key=value pairs of one slog text line.
func parseLogfmt(line string) map[string]string {
	kv := map[string]string{}
	for _, m := range logfmtPair.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		kv[m[1]] = v
	}
	return kv
}
