//go:build stormtrace

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRecordStormTrace records the NBD read trace `bootfleet storm`
// replays by default: a stock Debian 12 (the GPT ext4 disk of
// TestDebianDiskless) booted diskless through bootfleet by SeaBIOS and
// iPXE, its reads captured by `bootfleet storm record` on the server's
// bridge from its first NBD request to its DoneURL call. The build tag
// keeps it out of `make test` (about 5 minutes); record a new trace with
//
//	cd test/e2e && BOOTFLEET_STORM_TRACE=$PWD/../../internal/storm/testdata/debian12.trace \
//	    go test -tags stormtrace -run TestRecordStormTrace -v .
//
// Without BOOTFLEET_STORM_TRACE the trace is left in the artifacts.
func TestRecordStormTrace(t *testing.T) {
	d := startDebianServer(t, nil)
	e, lan, dir, cli := d.e, d.lan, d.dir, d.cli
	cli.run("profile", "add", "debian", "--kernel", d.vmlinuz, "--initrd", d.initrd,
		"--cmdline", "console=ttyS0 quiet panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}",
		"--root-image", "debian", "--overlay", "ephemeral")
	const mac = "52:54:00:de:b7:01"
	cli.run("machine", "add", "--mac", mac, "--name", "trace", "--profile", "debian")

	out := filepath.Join(dir, "debian12.trace")
	rec := startProc(t, "storm-record", lan.command(e.bin, "storm", "record", "-i", bridge, "-o", out), filepath.Join(dir, "record.log"))
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := rec.waitLine(ctx, contains("recording NBD reads")); err != nil {
		t.Fatalf("storm record did not start: %v\n%s", err, rec.out.tail(10))
	}

	args := []string{
		"-accel", "tcg", "-m", "1024", "-smp", "1",
		"-nographic", "-serial", "stdio", "-monitor", "none", "-boot", "n",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac,
	}
	start := time.Now()
	q := startProc(t, "qemu-trace", lan.command("qemu-system-x86_64", args...), filepath.Join(dir, "serial.log"))
	vctx, vcancel := contextTimeout(2 * bootTimeout(t))
	defer vcancel()
	if _, err := q.waitLine(vctx, func(line string) (bool, error) {
		return strings.Contains(line, "BOOTFLEET-DONE-CALLED"), nil
	}); err != nil {
		t.Fatalf("Debian did not reach its DoneURL: %v\n%s", err, q.out.tail(40))
	}
	t.Logf("Debian called its DoneURL %.0f s after power-on", time.Since(start).Seconds())
	syscall.Kill(rec.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-rec.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("storm record did not stop on SIGINT\n%s", rec.out.tail(10))
	}
	q.stop()
	if rec.exitErr != nil {
		t.Fatalf("storm record: %v\n%s", rec.exitErr, rec.out.tail(10))
	}
	t.Logf("%s", strings.TrimSpace(rec.out.tail(3)))
	if dst := os.Getenv("BOOTFLEET_STORM_TRACE"); dst != "" {
		content, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, content, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", dst)
	}
}
