package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// Diskless root over NBD: the initramfs from `bootfleet initramfs build`
// (bootfleet-agent as /init) mounts an ext4 image over NBD and switches to
// it. The image's /sbin/init (rootInit) prints BOOTFLEET-ROOT-UP, whether
// the marker file of an earlier boot exists, writes one when the command
// line says bf.write=TEXT, calls done=URL if given, and powers off.

// rootInit is /sbin/init of the test root image.
const rootInit = `#!/bin/sh
# Test root on NBD: report the marker, maybe write one, call the DoneURL, power off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t tmpfs tmpfs /tmp
echo "BOOTFLEET-ROOT-UP: $(cat /proc/mounts | grep ' / ' | head -n1)"
write=""; url=""; pause=""
for w in $(cat /proc/cmdline); do
  case "$w" in
  bf.write=*) write=${w#bf.write=} ;;
  bf.pause=*) pause=${w#bf.pause=} ;;
  done=*) url=${w#done=} ;;
  esac
done
if [ -e /var/bf-marker ]; then
  echo "BOOTFLEET-MARKER: present $(cat /var/bf-marker)"
else
  echo "BOOTFLEET-MARKER: absent"
fi
if [ -n "$pause" ]; then
  # The test restarts the NBD server now; the I/O after the pause must
  # wait for the agent's watcher to reconnect, then succeed.
  echo "BOOTFLEET-PAUSE: $pause"
  sleep "$pause"
  echo 3 >/proc/sys/vm/drop_caches
  cat /bin/busybox /sbin/init >/dev/null && echo "BOOTFLEET-READ-AFTER-PAUSE: ok"
fi
if [ -n "$write" ]; then
  echo "$write" >/var/bf-marker && sync && echo "BOOTFLEET-WROTE: $write"
  # Read it back from the disk, not from the page cache.
  echo 3 >/proc/sys/vm/drop_caches
  echo "BOOTFLEET-READBACK: $(cat /var/bf-marker)"
fi
if [ -n "$url" ]; then
  n=0
  until timeout 15 wget -q -O /tmp/done "$url"; do
    n=$((n + 1))
    if [ $n -ge 5 ]; then echo "BOOTFLEET-FAIL: GET $url failed 5 times"; break; fi
    sleep 2
  done
fi
echo "BOOTFLEET-DONE $url"
sync
mount -o remount,ro / 2>/dev/null
poweroff -f
`

// makeRootImage writes an ext4 image holding static busybox and rootInit,
// with mkfs.ext4 -d (e2fsprogs), no loop mount needed.
func makeRootImage(t *testing.T, path string) { makeRootImageInit(t, path, rootInit, nil) }

// makeRootImageInit is makeRootImage with init as /sbin/init; extra, if
// set, adds files to the image's tree before mkfs.
func makeRootImageInit(t *testing.T, path, init string, extra func(dir string)) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "tmp", "var", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, "/bin/busybox", filepath.Join(dir, "bin/busybox"))
	os.Chmod(filepath.Join(dir, "bin/busybox"), 0o755)
	for _, a := range []string{"sh", "cat", "echo", "grep", "head", "mount", "sync", "poweroff", "wget", "timeout", "sleep", "ls"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sbin/init"), []byte(init), 0o755); err != nil {
		t.Fatal(err)
	}
	if extra != nil {
		extra(dir)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "bfroot", "-d", dir, path, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 -d: %v\n%s", err, out)
	}
}

// nbdEnv is what the NBD root tests add to env: the agent and its initramfs.
type nbdEnv struct {
	agent  string
	initrd string
}

var (
	nbdOnce sync.Once
	nbdPrep nbdEnv
	nbdErr  error
)

// needNBD builds bootfleet-agent and the initramfs once per run, from the
// same kernel package as the test image, so modules match the vmlinuz.
func needNBD(t *testing.T, e *env) *nbdEnv {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "nbdkit", "dpkg-deb", "/bin/busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ciMode {
				t.Fatalf("BOOTFLEET_CI=1 but %s is missing; run scripts/deps.sh", tool)
			}
			t.Skipf("%s not found (run scripts/deps.sh)", tool)
		}
	}
	nbdOnce.Do(func() {
		cache := os.Getenv("BOOTFLEET_CACHE")
		if cache == "" {
			cache = "/var/cache/bootfleet-e2e"
		}
		debs, _ := filepath.Glob(filepath.Join(cache, "debs", "linux-image-[0-9]*-amd64_*.deb"))
		if len(debs) == 0 {
			nbdErr = fmt.Errorf("no kernel .deb in %s/debs; scripts/mkimage.sh should have left one", cache)
			return
		}
		sort.Strings(debs)
		// The kernel mkimage.sh used is the one its stamp names.
		deb := debs[len(debs)-1]
		if stamp, err := os.ReadFile(filepath.Join(cache, "image", ".stamp")); err == nil {
			for _, d := range debs {
				if strings.HasPrefix(string(stamp), filepath.Base(d)+" ") {
					deb = d
				}
			}
		}
		nbdPrep.agent = filepath.Join(binDir, "bootfleet-agent")
		nbdPrep.initrd = filepath.Join(binDir, "initrd-nbd.img")
		// Built as make build does, without symbol tables: the agent is
		// most of the initramfs every machine fetches.
		if err := runEnv(e.repo, 5*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", nbdPrep.agent, "./cmd/bootfleet-agent"); err != nil {
			nbdErr = fmt.Errorf("build bootfleet-agent: %w", err)
			return
		}
		if err := run(e.repo, 5*time.Minute, e.bin, "initramfs", "build", "--kernel-deb", deb, "--agent", nbdPrep.agent, "--out", nbdPrep.initrd); err != nil {
			nbdErr = fmt.Errorf("bootfleet initramfs build: %w", err)
		}
	})
	if nbdErr != nil {
		t.Fatal(nbdErr)
	}
	return &nbdPrep
}

func runEnv(dir string, timeout time.Duration, extraEnv []string, name string, args ...string) error {
	ctx, cancel := contextTimeout(timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// startNbdkit serves image on serverIP:10809 in ns under one export name;
// nbdkit's strict exportname filter refuses any other, so a boot proves the
// agent sent the name from the command line.
func startNbdkit(t *testing.T, ns *netns, dir, image, export string) *proc {
	t.Helper()
	cmd := ns.command("nbdkit", "--foreground", "--verbose", "-i", serverIP, "-p", "10809",
		"--filter=exportname", "file", image, "exportname-strict=true", "exportname="+export)
	p := startProc(t, "nbdkit", cmd, filepath.Join(dir, fmt.Sprintf("nbdkit-%d.log", time.Now().UnixNano())))
	if err := ns.waitTCP(serverIP, 10809, 10*time.Second, p.alive); err != nil {
		t.Fatalf("nbdkit did not come up: %v\n%s", err, p.out.tail(20))
	}
	return p
}

// startLANDnsmasq gives the VMs addresses on br0 (no boot options).
func startLANDnsmasq(t *testing.T, ns *netns, dir string) *proc {
	t.Helper()
	return runDnsmasq(t, ns, dir, "--interface="+bridge, "--dhcp-range=10.213.0.50,10.213.0.90,255.255.255.0,1h")
}

// rootBoot is what a VM booted on an NBD root printed.
type rootBoot struct {
	marker  string // after "BOOTFLEET-MARKER: "
	wall    time.Duration
	rootUp  time.Duration // QEMU start to BOOTFLEET-ROOT-UP
	console *proc
}

// bootDirect boots vmlinuz + the NBD initramfs with QEMU's -kernel (no
// firmware network boot: this isolates the agent) and waits for the root
// image's BOOTFLEET-DONE.
func bootDirect(t *testing.T, e *env, n *nbdEnv, ns *netns, dir, mac, tap, cmdline string, during func(line string)) rootBoot {
	t.Helper()
	args := []string{
		"-accel", "tcg", "-m", "512", "-smp", "1",
		"-nographic", "-serial", "stdio", "-monitor", "none", "-no-reboot",
		"-kernel", e.vmlinuz, "-initrd", n.initrd, "-append", cmdline,
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,romfile=,mac=" + mac,
	}
	name := "qemu-direct-" + mac
	log := filepath.Join(dir, fmt.Sprintf("serial-%s-%d.log", strings.ReplaceAll(mac, ":", "-"), time.Now().UnixNano()))
	start := time.Now()
	q := startProc(t, name, ns.command("qemu-system-x86_64", args...), log)
	return waitRoot(t, q, start, bootTimeout(t), during)
}

// waitRoot follows a console until BOOTFLEET-DONE and returns what the root printed.
func waitRoot(t *testing.T, q *proc, start time.Time, timeout time.Duration, during func(line string)) rootBoot {
	t.Helper()
	ctx, cancel := contextTimeout(timeout)
	defer cancel()
	res := rootBoot{console: q}
	_, err := q.waitLine(ctx, func(line string) (bool, error) {
		if during != nil {
			during(line)
		}
		switch {
		case strings.HasPrefix(line, "BOOTFLEET-ROOT-UP"):
			res.rootUp = time.Since(start)
		case strings.HasPrefix(line, "BOOTFLEET-MARKER: "):
			res.marker = strings.TrimPrefix(line, "BOOTFLEET-MARKER: ")
		case strings.HasPrefix(line, "BOOTFLEET-FAIL"):
			return false, fmt.Errorf("the VM gave up: %s", line)
		case strings.Contains(line, "Kernel panic"):
			return false, fmt.Errorf("kernel panic: %s", line)
		}
		return strings.HasPrefix(line, "BOOTFLEET-DONE"), nil
	})
	if err != nil {
		t.Fatalf("waiting for BOOTFLEET-DONE from the NBD root: %v (after %v)\n--- console (last 50 lines) ---\n%s",
			err, time.Since(start).Round(time.Second), q.out.tail(50))
	}
	res.wall = time.Since(start)
	select {
	case <-q.exited:
	case <-time.After(15 * time.Second):
		q.stop()
	}
	return res
}

// TestNBDRootAgent proves the client side on its own: direct kernel boot,
// DHCP from dnsmasq, root from nbdkit (a file export, so writes persist).
// Boot 1 finds no marker and writes one; boot 2 finds it, and nbdkit is
// restarted under it to prove reconnection; boot 3 finds boot 2's write.
func TestNBDRootAgent(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	n := needNBD(t, e)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	startLANDnsmasq(t, lan, dir)
	image := filepath.Join(t.TempDir(), "root.ext4")
	makeRootImage(t, image)

	const export = "s3cret-per-boot"
	cmdline := "console=ttyS0 quiet panic=-1 bootfleet.root=nbd:" + serverIP + ":10809:" + export + " bf.write=boot1"
	srv := startNbdkit(t, lan, dir, image, export)
	b1 := bootDirect(t, e, n, lan, dir, "52:54:00:e2:e1:01", "tap0", cmdline, nil)
	if b1.marker != "absent" {
		t.Errorf("boot 1 of a fresh image: marker %q, want absent", b1.marker)
	}
	t.Logf("boot 1: root up after %.1fs, done after %.1fs", b1.rootUp.Seconds(), b1.wall.Seconds())
	srv.stop()

	// Boot 2 also proves reconnection: when the root pauses, the test
	// restarts nbdkit under it; the agent's watcher must see the kernel's
	// NBD_CMD_LINK_DEAD, handshake again and NBD_CMD_RECONFIGURE, and the
	// root's reads and writes after the pause must succeed.
	srv = startNbdkit(t, lan, dir, image, export)
	var reconnected, readOK bool
	cmdline2 := strings.Replace(cmdline, "bf.write=boot1", "bf.write=boot2 bf.pause=8 bootfleet.nbd.timeout=5", 1)
	b2 := bootDirect(t, e, n, lan, dir, "52:54:00:e2:e1:01", "tap0", cmdline2, func(line string) {
		switch {
		case strings.HasPrefix(line, "BOOTFLEET-PAUSE"):
			// SIGKILL, a crash: on SIGTERM nbdkit answers in-flight
			// requests with ESHUTDOWN, which the kernel reports as I/O
			// errors that no reconnect can undo.
			syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
			<-srv.exited
			time.Sleep(time.Second)
			srv = startNbdkit(t, lan, dir, image, export)
		case strings.HasPrefix(line, "BOOTFLEET-NBD-RECONNECTED"):
			reconnected = true
		case strings.HasPrefix(line, "BOOTFLEET-READ-AFTER-PAUSE: ok"):
			readOK = true
		}
	})
	if b2.marker != "present boot1" {
		t.Errorf("boot 2: marker %q, want \"present boot1\" (the write of boot 1 did not reach the export)", b2.marker)
	}
	if !reconnected || !readOK {
		t.Errorf("boot 2: after the NBD server restart: reconnected=%v, reads ok=%v; want both", reconnected, readOK)
	}
	t.Logf("boot 2 (with a server restart): root up after %.1fs, done after %.1fs", b2.rootUp.Seconds(), b2.wall.Seconds())
	srv.stop()

	// Boot 3: the write made after the reconnect reached the export.
	srv = startNbdkit(t, lan, dir, image, export)
	b3 := bootDirect(t, e, n, lan, dir, "52:54:00:e2:e1:01", "tap0", strings.Replace(cmdline, "bf.write=boot1", "", 1), nil)
	if b3.marker != "present boot2" {
		t.Errorf("boot 3: marker %q, want \"present boot2\" (the write after the reconnect was lost)", b3.marker)
	}
	t.Logf("boot 3: root up after %.1fs, done after %.1fs", b3.rootUp.Seconds(), b3.wall.Seconds())
}

// nbdRootConfig: two machines on one image, one per overlay mode that keeps
// or drops writes. Each writes its own name into the marker file.
var nbdRootConfig = template.Must(template.New("nbdroot").Parse(`# generated by test/e2e (nbdroot)
` + lanKeys + fullDHCPKeys + serviceKeys + `default_profile: ` + defaultProfile + `
profiles:
` + defaultProfileKeys + `  eph:
    kernel: {{ .Kernel }}
    initrd: [{{ .NBDInitrd }}]
    cmdline: "console=ttyS0 quiet panic=-1 bf.write={{ "{{ .Name }}" }} done={{ "{{ .DoneURL }}" }}"
    root: {image: ` + nbdImageName + `, overlay: ephemeral}
  pers:
    kernel: {{ .Kernel }}
    initrd: [{{ .NBDInitrd }}]
    cmdline: "console=ttyS0 quiet panic=-1 bf.write={{ "{{ .Name }}" }} done={{ "{{ .DoneURL }}" }}"
    root: {image: ` + nbdImageName + `, overlay: persistent}
machines:
  - {mac: "` + ephMAC + `", name: eph1, profile: eph}
  - {mac: "` + persMAC + `", name: pers1, profile: pers}
`))

const (
	nbdImageName = "bfroot"
	ephMAC       = "52:54:00:e2:e5:01"
	persMAC      = "52:54:00:e2:e5:02"
)

// bootRoot network-boots v through bootfleet (firmware, iPXE, kernel and
// the NBD initramfs over HTTP, root over bootfleet's NBD server) and
// returns the marker the root saw; it also checks that the kernel command
// line carried bootfleet.root=nbd:SERVER:10809:... and that bootfleet
// logged the DoneURL call.
func bootRoot(t *testing.T, e *env, ns *netns, dir string, server *proc, v vm) rootBoot {
	t.Helper()
	start := time.Now()
	q := startVM(t, e, ns, dir, v)
	var cmdline string
	res := waitRoot(t, q, start, v.waitFor(t), func(line string) {
		if s, ok := strings.CutPrefix(line, "BOOTFLEET-CMDLINE: "); ok {
			cmdline = s
		}
	})
	if !strings.Contains(cmdline, "bootfleet.root=nbd:"+serverIP+":10809:") {
		t.Errorf("%s: kernel command line %q lacks bootfleet.root=nbd:%s:10809:EXPORT", v.mac, cmdline, serverIP)
	}
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := server.waitLine(ctx, func(line string) (bool, error) {
		kv := parseLogfmt(line)
		return kv["msg"] == "boot complete" && sameMAC(kv["mac"], v.mac), nil
	}); err != nil {
		t.Errorf("%s: the root called its DoneURL but bootfleet logged no boot complete: %v", v.mac, err)
	}
	t.Logf("%s %s: root up %.1fs, done %.1fs, marker %q", v.fw, v.mac, res.rootUp.Seconds(), res.wall.Seconds(), res.marker)
	return res
}

// TestNBDRootOverlays is the overlays' VM proof with bootfleet as the server,
// one OVMF VM at a time: the ephemeral machine's marker is gone at its
// second boot; the persistent machine's is there, holding its own name
// only (two machines on one image see only their own writes); after
// `bootfleet machine reset` the persistent machine boots a clean image.
func TestNBDRootOverlays(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	n := needNBD(t, e)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server, cli := startNBDRootServer(t, e, n, lan, dir)

	eph := vm{fw: uefi, mac: ephMAC, tap: "tap0"}
	pers := vm{fw: uefi, mac: persMAC, tap: "tap0"}
	steps := []struct {
		what string
		v    vm
		want string
		pre  func()
	}{
		{"ephemeral, first boot", eph, "absent", nil},
		{"ephemeral, second boot: its write was discarded", eph, "absent", nil},
		{"persistent, first boot: the ephemeral machine's writes are not in the image", pers, "absent", nil},
		{"persistent, second boot: its own write survived", pers, "present pers1", nil},
		// No --force: the VM is off (QEMU exited) without closing its TCP
		// connection; the server's keepalive probes end that session
		// within about 20 s, after which a plain reset is accepted.
		{"persistent after machine reset: a clean image", pers, "absent", func() { resetWhenDisconnected(t, cli, persMAC) }},
	}
	for _, s := range steps {
		if s.pre != nil {
			s.pre()
		}
		got := bootRoot(t, e, lan, dir, server, s.v)
		if got.marker != s.want {
			t.Errorf("%s: marker %q, want %q", s.what, got.marker, s.want)
		}
	}
	// The agent reported its steps into the boot record.
	var boots []struct {
		Milestones []struct{ Name string } `json:"milestones"`
	}
	cli.json(&boots, "boots", "--machine", persMAC)
	seen := map[string]bool{}
	for _, b := range boots {
		for _, m := range b.Milestones {
			seen[m.Name] = true
		}
	}
	for _, want := range []string{"agent-nbd-connected", "agent-switch-root"} {
		if !seen[want] {
			t.Errorf("no %q milestone in %s's boot records: %+v", want, persMAC, boots)
		}
	}
}

// startNBDRootServer starts bootfleet with nbdRootConfig and imports the
// test root image as nbdImageName; it returns the server and a CLI for it.
func startNBDRootServer(t *testing.T, e *env, n *nbdEnv, lan *netns, dir string) (*proc, *bootfleetCLI) {
	t.Helper()
	return startRootServer(t, e, n, lan, dir, nbdRootConfig, map[string]string{})
}

// startRootServer is startNBDRootServer with any config template; vars
// get Data and NBDInitrd added.
func startRootServer(t *testing.T, e *env, n *nbdEnv, lan *netns, dir string, tmpl *template.Template, vars map[string]string) (*proc, *bootfleetCLI) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "root.ext4")
	makeRootImage(t, image)
	vars["NBDInitrd"] = n.initrd
	return serveRootImage(t, e, lan, dir, tmpl, vars, serverIP, image)
}

// serveRootImage starts bootfleet with tmpl (vars get Data) reached at
// addr, waits for its NBD listener and imports image as nbdImageName.
func serveRootImage(t *testing.T, e *env, lan *netns, dir string, tmpl *template.Template, vars map[string]string, addr, image string) (*proc, *bootfleetCLI) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	vars["Data"] = data
	server := startBootfleetAt(t, e, lan, dir, tmpl, vars, addr)
	if err := lan.waitTCP(addr, 10809, 10*time.Second, server.alive); err != nil {
		t.Fatalf("bootfleet's NBD server: %v\n%s", err, server.out.tail(30))
	}
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log"), server: "http://" + net.JoinHostPort(addr, "8080")}
	cli.run("image", "import", nbdImageName, image)
	return server, cli
}

// resetWhenDisconnected runs `machine reset` until the server has noticed
// the powered-off machine's connection is dead; before that it must refuse.
func resetWhenDisconnected(t *testing.T, cli *bootfleetCLI, mac string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := cli.tryRun("machine", "reset", mac)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine reset still refused 90 s after the VM powered off: %v", err)
		}
		time.Sleep(3 * time.Second)
	}
}
