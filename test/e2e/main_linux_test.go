package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// env is what every boot test shares: the bootfleet binary and the test image,
// both built once per `go test` run.
type env struct {
	repo    string // repository root
	bin     string // bootfleet binary
	vmlinuz string
	initrd  string
	ovmf    string // pristine OVMF image; each VM boots a copy
	ipxeDir string
}

var (
	ciMode = os.Getenv("BOOTFLEET_CI") == "1"

	binDir string // holds the bootfleet binary built for this run

	prepOnce sync.Once
	prepEnv  env
	prepSkip string // why this machine cannot run VM boots; empty if it can
	prepErr  error  // a build that should have worked did not
)

const (
	ovmfPath = "/usr/share/ovmf/OVMF.fd"
	ipxeDir  = "/usr/lib/ipxe"
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "bf-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needEnv skips t (or fails it under BOOTFLEET_CI=1) when this machine cannot
// boot VMs, and otherwise returns the shared environment. The binary and the
// image are built on first use, so a plain `go test ./...` as a normal user
// costs nothing.
func needEnv(t testing.TB) *env {
	t.Helper()
	if testing.Short() && !ciMode {
		t.Skip("VM boots take minutes; skipped with -short")
	}
	prepOnce.Do(prepare)
	if prepSkip != "" {
		if ciMode {
			t.Fatalf("BOOTFLEET_CI=1 but %s; run scripts/deps.sh as root", prepSkip)
		}
		t.Skipf("%s (run scripts/deps.sh as root; BOOTFLEET_CI=1 turns this skip into a failure)", prepSkip)
	}
	if prepErr != nil {
		t.Fatal(prepErr)
	}
	return &prepEnv
}

func prepare() {
	if os.Geteuid() != 0 {
		prepSkip = "not root: network namespaces and tap devices need root"
		return
	}
	for _, tool := range []string{"ip", "bash", "qemu-system-x86_64", "dnsmasq"} {
		if _, err := exec.LookPath(tool); err != nil {
			prepSkip = tool + " not found in PATH"
			return
		}
	}
	for _, f := range []string{
		ovmfPath,
		filepath.Join(ipxeDir, "ipxe.efi"),
		filepath.Join(ipxeDir, "undionly.kpxe"),
		"/usr/lib/ipxe/qemu/efi-virtio.rom", // QEMU's default iPXE ROM for virtio-net (package ipxe-qemu)
		"/dev/net/tun",
	} {
		if _, err := os.Stat(f); err != nil {
			prepSkip = f + " is missing"
			return
		}
	}

	repo, err := filepath.Abs("../..")
	if err == nil {
		_, err = os.Stat(filepath.Join(repo, "go.mod"))
	}
	if err != nil {
		prepErr = fmt.Errorf("find the repository root from test/e2e: %w", err)
		return
	}
	prepEnv = env{repo: repo, ovmf: ovmfPath, ipxeDir: ipxeDir}
	// Another iPXE for UEFI VMs, e.g. a newer Debian ipxe package's
	// usr/lib/ipxe unpacked with dpkg-deb -x. BIOS VMs keep QEMU's ROM.
	if d := os.Getenv("BOOTFLEET_E2E_IPXE_DIR"); d != "" {
		prepEnv.ipxeDir = d
	}

	prepEnv.bin = os.Getenv("BOOTFLEET_BIN")
	if prepEnv.bin == "" {
		prepEnv.bin = filepath.Join(binDir, "bootfleet")
		if err := run(repo, 5*time.Minute, "go", "build", "-o", prepEnv.bin, "./cmd/bootfleet"); err != nil {
			prepErr = fmt.Errorf("build bootfleet: %w", err)
			return
		}
	}

	cache := os.Getenv("BOOTFLEET_CACHE")
	if cache == "" {
		cache = "/var/cache/bootfleet-e2e"
	}
	image := filepath.Join(cache, "image")
	if err := run(repo, 10*time.Minute, "bash", "scripts/mkimage.sh", image); err != nil {
		prepErr = fmt.Errorf("build the test image (scripts/mkimage.sh): %w", err)
		return
	}
	prepEnv.vmlinuz = filepath.Join(image, "vmlinuz")
	prepEnv.initrd = filepath.Join(image, "initrd.img")
}

// run runs a setup command and returns its output inside the error, since
// that output is the only clue when a build fails in CI.
func run(dir string, timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
