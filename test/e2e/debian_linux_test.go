package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A stock Debian 12 root (debootstrap, systemd, systemd-networkd doing DHCP
// on the NIC, the distribution's own kernel) booted diskless with no
// bootfleet.init= and no root partition named: the images admins have.
// scripts/mkdebian.sh makes the disks; debianUnit, added to each, reports
// what systemd reached, calls the DoneURL and then reboots (marker absent)
// or powers off (marker present), so a machine's second boot follows a
// real `systemctl reboot` through the firmware in the same VM.

// debianReport is /usr/local/sbin/bootfleet-e2e in the test images.
const debianReport = `#!/bin/bash
# bootfleet e2e: report what systemd reached on the NBD root, keep a marker,
# call the DoneURL, then reboot (no marker before) or power off.
exec >/dev/console 2>&1
for w in $(cat /proc/cmdline); do
  case "$w" in
  done=*) url=${w#done=} ;;
  bf.name=*) name=${w#bf.name=} ;;
  esac
done
watcher=no
proxy=no
for p in /proc/[0-9]*; do
  case "$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null)" in
  "@bootfleet-agent watch"*) watcher=yes ;;
  "@bootfleet-agent proxy"*) proxy=yes ;;
  esac
done
autofs=no
grep -q '^autofs4 ' /proc/modules && autofs=yes
# networkd's view of each link, from its state files (networkctl needs D-Bus).
net=""
for f in /run/systemd/netif/links/*; do
  net="$net$(. "$f"; echo "${NETWORK_FILE##*/}:$ADMIN_STATE:$OPER_STATE") "
done
echo "BOOTFLEET-SYSTEMD: multi-user=$(systemctl is-active multi-user.target) root=$(findmnt -n -o SOURCE,FSTYPE / | tr -s ' ' ,) kernel=$(uname -r) autofs4=$autofs watcher=$watcher proxy=$proxy nics=$(ls /sys/class/net | tr '\n' ,) net=${net% }"
echo "BOOTFLEET-FAILED-UNITS: $(systemctl --failed --no-legend --plain | awk '{print $1}' | tr '\n' ' ')"
if [ -e /var/bf-marker ]; then
  echo "BOOTFLEET-MARKER: present $(cat /var/bf-marker)"
  then=poweroff
else
  echo "BOOTFLEET-MARKER: absent"
  then=reboot
fi
echo "$name" >/var/bf-marker && sync
echo "BOOTFLEET-READBACK: $(cat /var/bf-marker)"
` + shCallDone + `echo "BOOTFLEET-DONE-CALLED: ${status%$'\r'} then=$then"
systemctl --no-block "$then"
`

// shCallDone is bash that GETs $url, the DoneURL, with bash's /dev/tcp
// (the images have no curl) and sets status to the HTTP status line.
const shCallDone = `rest=${url#http://}
hostport=${rest%%/*}
status=none
if exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; then
  printf 'GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n' "${rest#*/}" "$hostport" >&3
  read -r status <&3
  exec 3>&-
fi
`

// debianUnit runs debianReport once multi-user.target is reached.
const debianUnit = `[Unit]
Description=bootfleet e2e report
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/bootfleet-e2e

[Install]
WantedBy=multi-user.target
`

// makeDebianDisk runs scripts/mkdebian.sh with the e2e unit added.
func makeDebianDisk(t *testing.T, e *env, out string, args ...string) {
	t.Helper()
	makeDebianDiskWith(t, e, out, debianReport, debianUnit, args...)
}

// makeDebianDiskWith runs scripts/mkdebian.sh with report as the e2e
// script and unit as its systemd unit, enabled for multi-user.target.
func makeDebianDiskWith(t *testing.T, e *env, out, report, unit string, args ...string) {
	t.Helper()
	makeDebianDiskFiles(t, e, out, map[string]string{
		"usr/local/sbin/bootfleet-e2e":             report,
		"etc/systemd/system/bootfleet-e2e.service": unit,
	}, args...)
}

// makeDebianDiskFiles runs scripts/mkdebian.sh with files (path in the
// root: content, made executable) added, and
// etc/systemd/system/bootfleet-e2e.service, which files must hold,
// enabled for multi-user.target.
func makeDebianDiskFiles(t *testing.T, e *env, out string, files map[string]string, args ...string) {
	t.Helper()
	add := t.TempDir()
	for path, content := range files {
		p := filepath.Join(add, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(add, "etc/systemd/system/multi-user.target.wants"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/systemd/system/bootfleet-e2e.service", filepath.Join(add, "etc/systemd/system/multi-user.target.wants/bootfleet-e2e.service")); err != nil {
		t.Fatal(err)
	}
	args = append(append(args, "--add", add), out)
	if err := run(e.repo, 20*time.Minute, "bash", append([]string{"scripts/mkdebian.sh"}, args...)...); err != nil {
		t.Fatalf("make the Debian disk: %v", err)
	}
}

func needDebianTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"debootstrap", "sfdisk", "mkfs.xfs", "mkfs.btrfs", "mkfs.fat", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ciMode {
				t.Fatalf("BOOTFLEET_CI=1 but %s is missing; run scripts/deps.sh", tool)
			}
			t.Skipf("%s not found (run scripts/deps.sh)", tool)
		}
	}
}

// debianBoot is one boot of a Debian root as the console showed it.
type debianBoot struct {
	systemd, failedUnits, marker, done string
	pkg                                string // BOOTFLEET-PKG: what an image's report says of a package, if it does
	readback                           string // the marker as read back after the root wrote it
	shutdown                           string // the kernel's last word: "Restarting system" or "Power down"
	kernelURL                          string // what iPXE loaded first after the script: the kernel
	ioErrors                           []string
}

// ioErrorMarks are console lines that mean the root disk failed under the
// machine: what a NIC cut while the root is mounted looks like.
var ioErrorMarks = []string{"I/O error", "blk_update_request", "Buffer I/O error", "EXT4-fs error", "XFS (nbd", "BTRFS error", "block nbd0: Connection timed out", "Dead connection", "BOOTFLEET-FAIL:", "BOOTFLEET-WATCHER-STOPPED", "BOOTFLEET-PROXY-STOPPED"}

// runDebianVM boots mac (SeaBIOS, QEMU's iPXE ROM) and follows its console
// through boots Debian boots in one VM, each ended by the root's own
// reboot or power off. It stops the VM once it has them.
func runDebianVM(t *testing.T, ns *netns, dir, mac, tap string, boots int) []debianBoot {
	t.Helper()
	out, err := debianVM(t, ns, dir, mac, tap, boots)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// debianVM is runDebianVM for a goroutine of its own: it returns what
// failed rather than ending the test.
func debianVM(t *testing.T, ns *netns, dir, mac, tap string, boots int) ([]debianBoot, error) {
	t.Helper()
	start := time.Now()
	q := startDebianVM(t, ns, dir, mac, tap)
	defer q.stop()
	return followDebianBoots(t, q, start, mac, boots, time.Duration(boots)*2*bootTimeout(t))
}

// followDebianBoots reads the console of q, started at start, until it
// has shown boots Debian boots, each ended by the root's own reboot or
// power off, or until timeout.
func followDebianBoots(t *testing.T, q *proc, start time.Time, mac string, boots int, timeout time.Duration) ([]debianBoot, error) {
	t.Helper()
	var out []debianBoot
	cur := debianBoot{}
	ctx, cancel := contextTimeout(timeout)
	defer cancel()
	_, err := q.waitLine(ctx, func(line string) (bool, error) {
		for _, m := range ioErrorMarks {
			if strings.Contains(line, m) {
				cur.ioErrors = append(cur.ioErrors, line)
			}
		}
		if strings.Contains(line, "Kernel panic") {
			return false, fmt.Errorf("kernel panic: %s", line)
		}
		// iPXE loads the kernel first after the script; it wraps long
		// URLs at 80 columns, so only the start of the line is certain.
		if strings.HasPrefix(line, "http://") && !strings.Contains(line, "/ipxe/") && cur.kernelURL == "" {
			cur.kernelURL, _, _ = strings.Cut(line, "...")
		}
		if i := strings.Index(line, "BOOTFLEET-"); i >= 0 {
			k, v, _ := strings.Cut(line[i:], ": ")
			switch k {
			case "BOOTFLEET-SYSTEMD":
				cur.systemd = v
			case "BOOTFLEET-FAILED-UNITS":
				cur.failedUnits = strings.TrimSpace(v)
			case "BOOTFLEET-MARKER":
				cur.marker = v
			case "BOOTFLEET-READBACK":
				cur.readback = v
			case "BOOTFLEET-DONE-CALLED":
				cur.done = v
			case "BOOTFLEET-PKG":
				cur.pkg = v
			}
		}
		for _, s := range []string{"reboot: Restarting system", "reboot: Power down"} {
			if strings.Contains(line, s) {
				cur.shutdown = strings.TrimPrefix(s, "reboot: ")
				out = append(out, cur)
				t.Logf("%s boot %d ended after %.0fs: %s", mac, len(out), time.Since(start).Seconds(), cur.shutdown)
				cur = debianBoot{}
			}
		}
		return len(out) == boots, nil
	})
	if err != nil {
		return out, fmt.Errorf("%s: waiting for %d boots of the Debian root (got %d): %v\n--- console (last 60 lines) ---\n%s",
			mac, boots, len(out), err, q.out.tail(60))
	}
	return out, nil
}

// startDebianVM starts mac (SeaBIOS, QEMU's iPXE ROM, 1 GiB) on tap,
// its console in dir/serial-MAC.log.
func startDebianVM(t *testing.T, ns *netns, dir, mac, tap string) *proc {
	t.Helper()
	args := []string{
		"-accel", "tcg", "-m", "1024", "-smp", "1",
		"-nographic", "-serial", "stdio", "-monitor", "none", "-boot", "n",
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac,
	}
	log := filepath.Join(dir, "serial-"+strings.ReplaceAll(mac, ":", "-")+".log")
	return startProc(t, "qemu-debian-"+mac, ns.command("qemu-system-x86_64", args...), log)
}

// checkDebianBoot asserts what every boot of a Debian root must show; the
// root's daemon is the reconnect watcher, or with bootfleet.proxy=1 the
// root proxy, alone.
func checkDebianBoot(t *testing.T, what string, b debianBoot, fstype, kernel string, proxy bool) {
	t.Helper()
	daemon := []string{"watcher=yes", "proxy=no"}
	if proxy {
		daemon = []string{"watcher=no", "proxy=yes"}
	}
	for _, want := range append([]string{"multi-user=active", "," + fstype, "kernel=" + kernel, "autofs4=yes"}, daemon...) {
		if !strings.Contains(b.systemd, want) {
			t.Errorf("%s: systemd report %q lacks %q", what, b.systemd, want)
		}
	}
	// The image's networkd must take the hand-off: the link configured
	// (by the agent's .network file), not failed or re-leased.
	if !strings.Contains(b.systemd, "00-bootfleet-root.network:configured:routable") {
		t.Errorf("%s: systemd-networkd did not take the root's NIC as configured: %q", what, b.systemd)
	}
	if b.failedUnits != "" {
		t.Errorf("%s: failed units: %s", what, b.failedUnits)
	}
	if !strings.HasPrefix(b.done, "HTTP/1.") || !strings.Contains(b.done, " 200 ") && !strings.Contains(b.done, " 204 ") {
		t.Errorf("%s: the image's unit called the DoneURL and got %q, want 200 or 204", what, b.done)
	}
	if len(b.ioErrors) > 0 {
		t.Errorf("%s: the root disk failed:\n%s", what, strings.Join(b.ioErrors, "\n"))
	}
}

// TestDebianDiskless: GPT whole disk as qcow2 (ext4 root found by its
// Discoverable Partitions type), ephemeral and persistent machines across a
// `systemctl reboot`; an MBR disk with an XFS root (the only Linux
// partition beside swap) and a bare btrfs file system each boot once.
// Kernel and modules come from each image (initramfs build --image).
func TestDebianDiskless(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	n := needNBD(t, e)
	needDebianTools(t)
	dir := artifactDir(t)
	work := t.TempDir()

	// The XFS machine's profile says root.kernel: image, so the server
	// builds its kernel files; the others are built with the CLI.
	disks := []struct {
		name, file, table, fs string
		serverKernel          bool
	}{
		{"debian", "gpt-ext4.raw", "gpt", "ext4", false},
		{"debian-xfs", "mbr-xfs.raw", "mbr", "xfs", true},
		{"debian-btrfs", "btrfs.raw", "none", "btrfs", false},
	}
	for _, d := range disks {
		makeDebianDisk(t, e, filepath.Join(work, d.file), "--fs", d.fs, "--table", d.table)
	}
	// The GPT disk goes in as qcow2, as a cloud image would.
	qcow := filepath.Join(work, "gpt-ext4.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", filepath.Join(work, "gpt-ext4.raw"), qcow).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	os.Remove(filepath.Join(work, "gpt-ext4.raw"))

	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	data := filepath.Join(t.TempDir(), "data")
	server := startBootfleetConfig(t, e, lan, dir, nbdRootConfig, map[string]string{"Data": data, "NBDInitrd": n.initrd})
	if err := lan.waitTCP(serverIP, 10809, 10*time.Second, server.alive); err != nil {
		t.Fatalf("bootfleet's NBD server: %v\n%s", err, server.out.tail(30))
	}
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}

	kernels := map[string]string{}
	for _, d := range disks {
		file := filepath.Join(work, d.file)
		if d.name == "debian" {
			file = qcow
		}
		cli.run("image", "import", d.name, file)
		const cmdline = "console=ttyS0 quiet systemd.show_status=1 panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}"
		if d.serverKernel {
			cli.run("profile", "add", d.name+"-ephemeral", "--root-kernel", "image", "--cmdline", cmdline, "--root-image", d.name, "--overlay", "ephemeral")
			continue
		}
		initrd, vmlinuz := filepath.Join(work, d.name+"-initrd.img"), filepath.Join(work, d.name+"-vmlinuz")
		out := string(cli.run("initramfs", "build", "--image", d.name, "--agent", n.agent, "--out", initrd, "--kernel-out", vmlinuz))
		// "wrote FILE: kernel VERSION, modules ..."
		f := strings.Fields(out[strings.Index(out, "kernel "):])
		kernels[d.name] = strings.TrimSuffix(f[1], ",")
		if ki, err := os.Stat(vmlinuz); err == nil {
			if ii, err := os.Stat(initrd); err == nil {
				t.Logf("%s: unicast per boot: kernel %d + initramfs %d = %d bytes", d.name, ki.Size(), ii.Size(), ki.Size()+ii.Size())
			}
		}
		if !strings.Contains(out, " "+d.fs) {
			t.Errorf("initramfs for %s (%s root): modules lack %s: %s", d.name, d.fs, d.fs, out)
		}
		for _, overlay := range []string{"ephemeral", "persistent"} {
			cli.run("profile", "add", d.name+"-"+overlay, "--kernel", vmlinuz, "--initrd", initrd,
				"--cmdline", cmdline, "--root-image", d.name, "--overlay", overlay)
		}
	}

	type machine struct{ mac, name, profile, fs, kernelOf string }
	eph := machine{"52:54:00:de:b1:01", "deb-eph", "debian-ephemeral", "ext4", "debian"}
	pers := machine{"52:54:00:de:b1:02", "deb-pers", "debian-persistent", "ext4", "debian"}
	// The same debootstrap tree, so the same kernel as the CLI found.
	xfs := machine{"52:54:00:de:b1:03", "deb-xfs", "debian-xfs-ephemeral", "xfs", "debian"}
	btrfs := machine{"52:54:00:de:b1:04", "deb-btrfs", "debian-btrfs-ephemeral", "btrfs", "debian-btrfs"}
	for _, m := range []machine{eph, pers, xfs, btrfs} {
		cli.run("machine", "add", "--mac", m.mac, "--name", m.name, "--profile", m.profile)
	}

	for _, c := range []struct {
		m       machine
		markers []string // per boot
		ends    []string
	}{
		{eph, []string{"absent", "absent"}, []string{"Restarting system", "Restarting system"}},
		{pers, []string{"absent", "present deb-pers"}, []string{"Restarting system", "Power down"}},
		{xfs, []string{"absent"}, []string{"Restarting system"}},
		{btrfs, []string{"absent"}, []string{"Restarting system"}},
	} {
		boots := runDebianVM(t, lan, dir, c.m.mac, "tap0", len(c.markers))
		for i, b := range boots {
			what := fmt.Sprintf("%s boot %d", c.m.name, i+1)
			checkDebianBoot(t, what, b, c.m.fs, kernels[c.m.kernelOf], false)
			if b.marker != c.markers[i] {
				t.Errorf("%s: marker %q, want %q", what, b.marker, c.markers[i])
			}
			if wantImages := c.m == xfs; wantImages != strings.Contains(b.kernelURL, "/images/") {
				t.Errorf("%s: kernel loaded from %q; want the server-built /images/SHA256/... only for the root.kernel: image profile", what, b.kernelURL)
			}
			if b.shutdown != c.ends[i] {
				t.Errorf("%s: ended with %q, want %q (systemctl reboot or poweroff must finish)", what, b.shutdown, c.ends[i])
			}
		}
	}
}
