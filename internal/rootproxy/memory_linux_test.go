package rootproxy

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHardenForIO runs HardenForIO in a child process (mlockall would
// lock the test binary's whole heap) and checks the flag it set.
func TestHardenForIO(t *testing.T) {
	if os.Getenv("ROOTPROXY_HARDEN_CHILD") == "1" {
		if err := HardenForIO(); err != nil {
			os.Stdout.WriteString("ERR " + err.Error())
			return
		}
		v, err := unix.PrctlRetInt(unix.PR_GET_IO_FLUSHER, 0, 0, 0, 0)
		if err != nil || v != 1 {
			os.Stdout.WriteString("ERR io flusher not set")
			return
		}
		os.Stdout.WriteString("OK")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardenForIO$")
	cmd.Env = append(os.Environ(), "ROOTPROXY_HARDEN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if hasCap(t, unix.CAP_SYS_RESOURCE) && hasCap(t, unix.CAP_IPC_LOCK) {
		if !strings.Contains(string(out), "OK") {
			t.Fatalf("with CAP_SYS_RESOURCE and CAP_IPC_LOCK: %s", out)
		}
		return
	}
	// A container without the capabilities: the error must name what
	// failed and what to grant.
	if !strings.Contains(string(out), "CAP_") {
		t.Fatalf("without the capabilities, got %q, want an error naming the capability", out)
	}
}

// hasCap reports whether the effective set of this process holds c.
func hasCap(t *testing.T, c int) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n&(1<<c) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}
