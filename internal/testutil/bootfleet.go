package testutil

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BootfleetBinary is $BOOTFLEET_BIN, or a fresh build of this tree, for
// tests that run `bootfleet serve` as a child process they can kill -9.
func BootfleetBinary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("BOOTFLEET_BIN"); b != "" {
		return b
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "bootfleet")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/bootfleet/bootfleet/cmd/bootfleet")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build bootfleet: %v\n%s", err, out)
	}
	return bin
}

// SkipUnlessCI skips the test because of why, except under BOOTFLEET_CI=1,
// where a missing prerequisite is a failure: CI installs everything.
func SkipUnlessCI(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("BOOTFLEET_CI") != "" {
		t.Fatalf("BOOTFLEET_CI=1 but %s; run the tests as root after scripts/deps.sh", why)
	}
	t.Skipf("%s (BOOTFLEET_CI=1 turns this skip into a failure)", why)
}

// ShmDir is a temp dir on /dev/shm (tmpfs), for a test that needs files
// in memory; it is removed when the test ends.
func ShmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "bf-test-")
	if err != nil {
		SkipUnlessCI(t, "no /dev/shm: "+err.Error())
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FreeAddr is a loopback TCP address nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
