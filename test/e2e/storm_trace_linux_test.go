//go:build stormtrace

package e2e

import (
	"bytes"
	"fmt"
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
	d.cli.run("profile", "add", "debian", "--kernel", d.vmlinuz, "--initrd", d.initrd,
		"--cmdline", "console=ttyS0 quiet panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}",
		"--root-image", "debian", "--overlay", "ephemeral")
	const mac = "52:54:00:de:b7:01"
	d.cli.run("machine", "add", "--mac", mac, "--name", "trace", "--profile", "debian")
	r := recordBootTrace(t, d, "debian12.trace", mac, 2*bootTimeout(t), "",
		"-m", "1024", "-smp", "1", "-nographic")
	t.Logf("Debian called its DoneURL %.0f s after power-on", r.boot.Seconds())
	keepTrace(t, r.trace, 0, nil)
}

// recordedBoot is one boot recorded by recordBootTrace.
type recordedBoot struct {
	trace  string        // the trace storm record wrote
	boot   time.Duration // from power-on to the DoneURL call's marker
	serial *proc         // the VM, stopped, with its console
}

// recordBootTrace boots the machine mac of d in one TCG VM (machine: the
// memory, CPU and display arguments) while `bootfleet storm record`
// captures its NBD reads on the bridge into name in the artifacts, and
// stops both once the console shows BOOTFLEET-DONE-CALLED. A console line
// with fail (if not empty) ends the test at once.
func recordBootTrace(t *testing.T, d *debianServer, name, mac string, timeout time.Duration, fail string, machine ...string) recordedBoot {
	t.Helper()
	out := filepath.Join(d.dir, name)
	rec := startProc(t, "storm-record", d.lan.command(d.e.bin, "storm", "record", "-i", bridge, "-o", out), filepath.Join(d.dir, "record.log"))
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := rec.waitLine(ctx, contains("recording NBD reads")); err != nil {
		t.Fatalf("storm record did not start: %v\n%s", err, rec.out.tail(10))
	}

	args := append([]string{"-accel", "tcg"}, machine...)
	args = append(args,
		"-serial", "stdio", "-monitor", "none", "-boot", "n",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac)
	start := time.Now()
	q := startProc(t, "qemu-trace", d.lan.command("qemu-system-x86_64", args...), filepath.Join(d.dir, "serial.log"))
	vctx, vcancel := contextTimeout(timeout)
	defer vcancel()
	line, err := q.waitLine(vctx, func(line string) (bool, error) {
		if fail != "" && strings.Contains(line, fail) {
			return false, fmt.Errorf("the guest said %q", strings.TrimSpace(line))
		}
		return strings.Contains(line, "BOOTFLEET-DONE-CALLED"), nil
	})
	if err != nil {
		t.Fatalf("the machine did not reach its DoneURL within %s: %v\n%s", timeout, err, q.out.tail(60))
	}
	boot := time.Since(start)
	if !strings.Contains(line, "BOOTFLEET-DONE-CALLED: HTTP/1.") || !strings.Contains(line, " 200 ") && !strings.Contains(line, " 204 ") {
		t.Errorf("DoneURL call: %q, want HTTP 200 or 204", strings.TrimSpace(line))
	}
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
	return recordedBoot{trace: out, boot: boot, serial: q}
}

// keepTrace copies the trace at path to BOOTFLEET_STORM_TRACE, if set,
// with header (what was booted, how, and the test that records it) as
// comment lines after the format line, above storm record's own, and a
// size line for the export's size if size is not 0 (storm record sees
// only the reads, not the size the server announced).
func keepTrace(t *testing.T, path string, size int64, header []string) {
	t.Helper()
	dst := os.Getenv("BOOTFLEET_STORM_TRACE")
	if dst == "" {
		return
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(header) > 0 || size > 0 {
		first, rest, ok := bytes.Cut(content, []byte("\n"))
		if !ok || !bytes.HasPrefix(first, []byte("bootfleet-trace ")) {
			t.Fatalf("%s: first line %q, want the bootfleet-trace format line", path, first)
		}
		var b bytes.Buffer
		b.Write(first)
		b.WriteByte('\n')
		for _, h := range header {
			b.WriteString("# " + h + "\n")
		}
		// storm record's comments end where its reads begin.
		for len(rest) > 0 && rest[0] == '#' {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			b.Write(line)
			b.WriteByte('\n')
			rest = after
		}
		if size > 0 {
			fmt.Fprintf(&b, "size %d\n", size)
		}
		b.Write(rest)
		content = b.Bytes()
	}
	if err := os.WriteFile(dst, content, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", dst)
}
