package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// debianServer is bootfleet serving the Debian 12 GPT ext4 disk of
// TestDebianDiskless, imported as "debian", with an initramfs of the
// image's own kernel built for profiles.
type debianServer struct {
	e               *env
	lan             *netns
	dir             string
	server          *proc
	cli             *bootfleetCLI
	initrd, vmlinuz string
}

// startDebianServer starts it on a fresh LAN with a tap, tap0, for a VM;
// vars adds to the config's template (Multicast: multicast.mode, off by
// default; MulticastRate).
func startDebianServer(t *testing.T, vars map[string]string) *debianServer {
	t.Helper()
	return startDebianServerDisk(t, vars, func(e *env, disk string) {
		makeDebianDisk(t, e, disk, "--fs", "ext4", "--table", "gpt")
	})
}

// startDebianServerDisk is startDebianServer serving the disk makeDisk
// writes to the path it is given instead.
func startDebianServerDisk(t *testing.T, vars map[string]string, makeDisk func(e *env, disk string)) *debianServer {
	t.Helper()
	e := needEnv(t)
	n := needNBD(t, e)
	needDebianTools(t)
	d := &debianServer{e: e, dir: artifactDir(t)}
	work := t.TempDir()
	disk := filepath.Join(work, "debian.raw")
	makeDisk(e, disk)
	d.lan = newLAN(t)
	d.lan.addTap(t, "tap0")
	startCapture(t, d.lan, d.dir)
	data := filepath.Join(t.TempDir(), "data")
	all := map[string]string{"Data": data, "NBDInitrd": n.initrd}
	for k, v := range vars {
		all[k] = v
	}
	d.server = startBootfleetConfig(t, e, d.lan, d.dir, nbdRootConfig, all)
	if err := d.lan.waitTCP(serverIP, 10809, 10*time.Second, d.server.alive); err != nil {
		t.Fatalf("bootfleet's NBD server: %v\n%s", err, d.server.out.tail(30))
	}
	d.cli = &bootfleetCLI{t: t, e: e, ns: d.lan, data: data, log: filepath.Join(d.dir, "cli.log")}
	d.cli.run("image", "import", "debian", disk)
	d.initrd, d.vmlinuz = filepath.Join(work, "initrd.img"), filepath.Join(work, "vmlinuz")
	d.cli.run("initramfs", "build", "--image", "debian", "--agent", n.agent, "--out", d.initrd, "--kernel-out", d.vmlinuz)
	return d
}

// TestRootProxyDebian: a stock Debian 12 read through the agent's root
// proxy (bootfleet.proxy=1) rather than by the kernel from the server:
// with a client-ram overlay (the proxy's read cache of the base on) and
// with a persistent server-side overlay (every read from the server),
// each reaches multi-user with the proxy as the root's only daemon, calls
// its DoneURL, survives systemd's shutdown through `systemctl reboot`
// and boots again; the persistent machine finds its marker.
func TestRootProxyDebian(t *testing.T) {
	parallelVM(t)
	d := startDebianServer(t, nil)
	cli := d.cli
	const cmdline = "console=ttyS0 quiet systemd.show_status=1 panic=-1 bootfleet.proxy=1 bf.name={{ .Name }} done={{ .DoneURL }}"
	for _, overlay := range []string{"client-ram", "persistent"} {
		cli.run("profile", "add", "proxy-"+overlay, "--kernel", d.vmlinuz, "--initrd", d.initrd,
			"--cmdline", cmdline, "--root-image", "debian", "--overlay", overlay)
	}
	for i, c := range []struct {
		overlay string
		markers []string
		ends    []string
	}{
		{"client-ram", []string{"absent", "absent"}, []string{"Restarting system", "Restarting system"}},
		{"persistent", []string{"absent", "present proxy-persistent"}, []string{"Restarting system", "Power down"}},
	} {
		mac := fmt.Sprintf("52:54:00:de:c1:%02x", i+1)
		cli.run("machine", "add", "--mac", mac, "--name", "proxy-"+c.overlay, "--profile", "proxy-"+c.overlay)
		boots := runDebianVM(t, d.lan, d.dir, mac, "tap0", len(c.markers))
		for j, b := range boots {
			what := fmt.Sprintf("%s boot %d", c.overlay, j+1)
			checkDebianBoot(t, what, b, "ext4", "", true)
			if b.marker != c.markers[j] {
				t.Errorf("%s: marker %q, want %q", what, b.marker, c.markers[j])
			}
			if b.shutdown != c.ends[j] {
				t.Errorf("%s: ended with %q, want %q (systemctl reboot or poweroff must finish)", what, b.shutdown, c.ends[j])
			}
		}
	}
}
