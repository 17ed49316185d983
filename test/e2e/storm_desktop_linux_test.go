//go:build stormtrace

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// desktopPackages are what the desktop trace's image adds to mkdebian's
// root: Xfce, lightdm with its GTK greeter, and Xorg (its modesetting
// driver drives QEMU's std VGA through bochs-drm), as Debian's packages
// without their recommends. A session bus for the user's session comes
// from dbus-user-session, a logind session from libpam-systemd; Firefox
// ESR is the browser the browser stage opens.
const desktopPackages = "xfce4,lightdm,lightdm-gtk-greeter,xserver-xorg,dbus-user-session,libpam-systemd,firefox-esr"

// desktopDiskSize is the desktop image's size: the root (a 1.1 GB tree)
// with room to spare, as an image author would leave it.
const desktopDiskSize = 4 << 30

// desktopUser is the login user of the desktop image, logged in by
// lightdm's autologin when the trace runs past the login screen.
const desktopUser = "desk"

// desktopStage is how far a desktop boot goes before its DoneURL call.
type desktopStage struct {
	// procs are the processes (by /proc/PID/comm, 15 characters at most)
	// that must run, and then go idle, for the stage to be on the screen.
	procs string
	// files are added to the image for the stage (path: content).
	files map[string]string
	// until says what was on the screen, for the trace's header.
	until string
}

// desktopStages: the login screen, the desktop after autologin, and a
// browser the session opens, the default: issue 31 asks for a trace of
// 300 MiB at least, which the first two do not read.
var desktopStages = map[string]desktopStage{
	"greeter": {
		procs: "Xorg lightdm-gtk-gre",
		until: "the lightdm-gtk-greeter login screen drawn and idle",
	},
	"session": {
		procs: "Xorg xfce4-panel xfdesktop",
		files: map[string]string{desktopAutologinPath: desktopAutologin},
		until: "lightdm's autologin of user " + desktopUser + " into Xfce, xfce4-panel and xfdesktop drawn and idle",
	},
	"browser": {
		procs: "Xorg xfce4-panel xfdesktop firefox-esr",
		files: map[string]string{
			desktopAutologinPath:                          desktopAutologin,
			"etc/xdg/autostart/bootfleet-browser.desktop": desktopBrowser,
		},
		until: "lightdm's autologin of user " + desktopUser + " into Xfce and Firefox ESR, which the session's autostart opens, drawn and idle" +
			" (the login screen and the bare Xfce desktop read less than the 300 MiB the storm benchmark wants)",
	},
}

// desktopReport is /usr/local/sbin/bootfleet-e2e in the desktop image:
// it waits, bounded, until the processes @WANT@ run and then until they
// go idle and the root disk quiet (under 5% of a CPU and 128 KiB read per
// 2 s, for 6 s: drawn and waiting for input), says so on the console and
// calls the DoneURL. The test stops the VM.
const desktopReport = `#!/bin/bash
# bootfleet desktop trace: wait until the desktop is on the screen, then
# call the DoneURL.
exec >/dev/console 2>&1
for w in $(cat /proc/cmdline); do
  case "$w" in done=*) url=${w#done=} ;; esac
done
want="@WANT@"
# ticks prints the CPU ticks (utime+stime) of the processes named in
# $want, and fails if one of them does not run. Builtins only: a fork per
# process a second would slow a TCG guest down.
ticks() {
  local total=0 n p c f hit
  for n in $want; do
    hit=no
    for p in /proc/[0-9]*; do
      read -r c 2>/dev/null <"$p/comm" || continue
      [ "$c" = "$n" ] || continue
      read -r -a f 2>/dev/null <"$p/stat" || continue
      total=$((total + f[13] + f[14]))
      hit=yes
    done
    [ "$hit" = yes ] || return 1
  done
  echo "$total"
}
# logs shows why a desktop did not come up.
logs() {
  systemctl --failed --no-legend --plain
  tail -n 40 /var/log/lightdm/lightdm.log /var/log/Xorg.0.log /var/log/lightdm/*greeter*.log /home/*/.xsession-errors 2>/dev/null
}
start=$SECONDS
until now=$(ticks); do
  if [ $((SECONDS - start)) -ge 1500 ]; then
    echo "BOOTFLEET-DESKTOP-FAILED: $want not all running after $((SECONDS - start)) s"
    logs
    exit 1
  fi
  sleep 2
done
up=$((SECONDS - start))
# sectors prints the sectors read from the root's disk so far: a process
# faulting its libraries in from NBD waits without using the CPU.
stat=/sys/class/block/$(basename "$(findmnt -n -o SOURCE /)")/stat
sectors() {
  local s
  read -r -a s 2>/dev/null <"$stat" || { echo 0; return; }
  echo "${s[2]}"
}
# Idle: under 10 ticks (5% of a 100 Hz CPU) and under 256 sectors (128 KiB)
# read in each of 3 samples 2 s apart.
idle=no
prev=$now
prevread=$(sectors)
quiet=0
while [ $((SECONDS - start - up)) -lt 600 ]; do
  sleep 2
  now=$(ticks) || break
  read=$(sectors)
  if [ $((now - prev)) -lt 10 ] && [ $((read - prevread)) -lt 256 ]; then quiet=$((quiet + 1)); else quiet=0; fi
  prev=$now
  prevread=$read
  if [ $quiet -ge 3 ]; then idle=yes; break; fi
done
if [ "$idle" != yes ]; then
  echo "BOOTFLEET-DESKTOP-FAILED: $want running after $up s but not idle within 600 s (or one exited)"
  logs
  exit 1
fi
read -r uptime _ </proc/uptime
echo "BOOTFLEET-DESKTOP: running=${want// /,} after=${up}s idle_after=$((SECONDS - start))s uptime=${uptime}s graphical=$(systemctl is-active graphical.target) kernel=$(uname -r) failed=$(systemctl --failed --no-legend --plain | awk '{print $1}' | tr '\n' ,)"
` + shCallDone + `echo "BOOTFLEET-DONE-CALLED: ${status%$'\r'}"
`

// desktopAutologin, at desktopAutologinPath, makes lightdm log
// desktopUser into Xfce at once.
const (
	desktopAutologinPath = "etc/lightdm/lightdm.conf.d/50-bootfleet-autologin.conf"
	desktopAutologin     = `[Seat:*]
autologin-user=` + desktopUser + `
autologin-session=xfce
`
)

// desktopBrowser is an XDG autostart entry: the session opens Firefox ESR
// on a blank page (the boot network has no internet to load one from).
const desktopBrowser = `[Desktop Entry]
Type=Application
Name=Browser
Exec=firefox-esr about:blank
`

// desktopTraceMin is the least a desktop trace must read: issue 31 asks
// for a trace of at least 300 MiB for the storm benchmark.
const desktopTraceMin = 300 << 20

// TestRecordDesktopTrace records internal/storm/testdata/desktop.trace:
// a Debian 12 root with Xfce, lightdm and Xorg (desktopPackages; GPT, ext4,
// 4 GiB) booted diskless with an ephemeral overlay through bootfleet in
// one TCG VM with QEMU's std VGA, its NBD reads captured by `bootfleet
// storm record` from its first request until the image's unit calls the
// DoneURL once the stage's processes run and have gone idle: with
// BOOTFLEET_DESKTOP_UNTIL=greeter the lightdm greeter's login screen, with
// session lightdm's autologin into the Xfce desktop, by default (browser)
// that and Firefox ESR opened by the session (desktopStages). Re-record it
// with (some minutes, and some 20 more to build the image the first time):
//
//	cd test/e2e && BOOTFLEET_STORM_TRACE=$PWD/../../internal/storm/testdata/desktop.trace \
//	    go test -tags stormtrace -run TestRecordDesktopTrace -timeout 60m -v .
func TestRecordDesktopTrace(t *testing.T) {
	stage := os.Getenv("BOOTFLEET_DESKTOP_UNTIL")
	if stage == "" {
		stage = "browser"
	}
	st, ok := desktopStages[stage]
	if !ok {
		t.Fatalf("BOOTFLEET_DESKTOP_UNTIL=%q: want greeter, session or browser", stage)
	}
	files := map[string]string{
		"usr/local/sbin/bootfleet-e2e": strings.ReplaceAll(desktopReport, "@WANT@", st.procs),
		// debianUnit's oneshot after multi-user.target: the report polls
		// rather than being ordered after lightdm, whose start says
		// nothing of what is on the screen, and no target waits for it.
		"etc/systemd/system/bootfleet-e2e.service": debianUnit,
	}
	for path, content := range st.files {
		files[path] = content
	}
	d := startDebianServerDisk(t, nil, func(e *env, disk string) {
		makeDebianDiskFiles(t, e, disk, files, "--fs", "ext4", "--table", "gpt", "--size", fmt.Sprintf("%dM", desktopDiskSize>>20),
			"--packages", desktopPackages, "--user", desktopUser)
	})
	d.cli.run("profile", "add", "desktop", "--kernel", d.vmlinuz, "--initrd", d.initrd,
		"--cmdline", "console=ttyS0 quiet panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}",
		"--root-image", "debian", "--overlay", "ephemeral")
	const mac = "52:54:00:de:b7:02"
	d.cli.run("machine", "add", "--mac", mac, "--name", "desktop", "--profile", "desktop")

	r := recordBootTrace(t, d, "desktop.trace", mac, 30*time.Minute, "BOOTFLEET-DESKTOP-FAILED",
		"-m", "2560", "-smp", "2", "-vga", "std", "-display", "none")
	report := ""
	lines, _ := r.serial.out.snapshot(0)
	for _, l := range lines {
		if i := strings.Index(l, "BOOTFLEET-DESKTOP: "); i >= 0 {
			report = strings.TrimSpace(l[i+len("BOOTFLEET-DESKTOP: "):])
		}
	}
	t.Logf("desktop (%s) called its DoneURL %.0f s after power-on: %s", stage, r.boot.Seconds(), report)
	kernel := field(report, "kernel")
	reads, bytes := traceTotals(t, r.trace)
	t.Logf("trace: %d reads, %d bytes (%.0f MiB)", reads, bytes, float64(bytes)/(1<<20))
	if bytes < desktopTraceMin {
		t.Errorf("the %s trace read %d bytes (%.0f MiB), want at least %d (300 MiB)", stage, bytes, float64(bytes)/(1<<20), desktopTraceMin)
	}
	keepTrace(t, r.trace, desktopDiskSize, []string{
		fmt.Sprintf("a Debian 12 desktop (debootstrap, systemd, kernel %s; %s, no recommends; GPT disk, ext4 root, 4 GiB)", kernel, desktopPackages),
		"booted diskless with an ephemeral overlay through bootfleet (SeaBIOS, iPXE, bootfleet-agent) in one TCG VM",
		fmt.Sprintf("(2 vCPUs, 2.5 GiB, std VGA), from its first NBD request to its DoneURL call after %s,", st.until),
		fmt.Sprintf("%.0f s after power-on: test/e2e TestRecordDesktopTrace (-tags stormtrace, BOOTFLEET_DESKTOP_UNTIL=%s)", r.boot.Seconds(), stage),
	})
}

// field returns the value of key=value in a space-separated report line.
func field(report, key string) string {
	for _, f := range strings.Fields(report) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return "?"
}

// traceTotals reads the reads and bytes storm record noted in the trace's
// comment ("N sessions, R reads, B bytes; ...").
func traceTotals(t *testing.T, path string) (reads, bytes int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var sessions int
		if n, _ := fmt.Sscanf(s.Text(), "# %d sessions, %d reads, %d bytes", &sessions, &reads, &bytes); n == 3 {
			return reads, bytes
		}
		if !strings.HasPrefix(s.Text(), "#") && !strings.HasPrefix(s.Text(), "bootfleet-trace") {
			break
		}
	}
	t.Fatalf("%s: no \"# N sessions, R reads, B bytes\" comment before the reads", path)
	return 0, 0
}
