package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImageVersions: the update workflow of issue 33 on the Debian 12
// image. The image's report unit writes its machine's name to
// /var/bf-marker at every boot and says whether the marker was there, so
// a version's content shows in what a machine reports:
//
//  1. import v1; a persistent machine boots it twice (its own marker);
//  2. image edit with a maintenance VM, which writes its marker and
//     reboots into the same read-write version, then powers off;
//  3. commit: a test-channel VM finds the maintenance marker, a
//     production VM does not; the version stores about what was written;
//  4. promote: the production VM finds it at its next boot;
//  5. rollback: it is gone at the boot after;
//
// and through all of it the persistent machine keeps v1 with its own
// marker.
func TestImageVersions(t *testing.T) {
	e := needEnv(t)
	n := needNBD(t, e)
	needDebianTools(t)
	dir := artifactDir(t)
	work := t.TempDir()
	disk := filepath.Join(work, "lab.raw")
	makeDebianDisk(t, e, disk, "--fs", "ext4", "--table", "gpt")
	st, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}

	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	data := filepath.Join(t.TempDir(), "data")
	server := startBootfleetConfig(t, e, lan, dir, nbdRootConfig, map[string]string{"Data": data, "NBDInitrd": n.initrd})
	if err := lan.waitTCP(serverIP, 10809, 10*time.Second, server.alive); err != nil {
		t.Fatalf("bootfleet's NBD server: %v\n%s", err, server.out.tail(30))
	}
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}
	cli.run("image", "import", "lab", disk)
	initrd, vmlinuz := filepath.Join(work, "initrd.img"), filepath.Join(work, "vmlinuz")
	cli.run("initramfs", "build", "--image", "lab", "--agent", n.agent, "--out", initrd, "--kernel-out", vmlinuz)
	const cmdline = "console=ttyS0 quiet systemd.show_status=1 panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}"
	for _, p := range []struct{ name, overlay, channel string }{
		{"lab-prod", "ephemeral", "production"}, {"lab-test", "ephemeral", "test"}, {"lab-pers", "persistent", "production"},
	} {
		cli.run("profile", "add", p.name, "--kernel", vmlinuz, "--initrd", initrd, "--cmdline", cmdline,
			"--root-image", "lab", "--overlay", p.overlay, "--root-channel", p.channel)
	}
	type machine struct{ mac, name, profile string }
	maint := machine{"52:54:00:de:c1:01", "deb-maint", "lab-prod"}
	tester := machine{"52:54:00:de:c1:02", "deb-test", "lab-test"}
	prod := machine{"52:54:00:de:c1:03", "deb-prod", "lab-prod"}
	pers := machine{"52:54:00:de:c1:04", "deb-pers", "lab-pers"}
	for _, m := range []machine{maint, tester, prod, pers} {
		cli.run("machine", "add", "--mac", m.mac, "--name", m.name, "--profile", m.profile)
	}
	// boot runs m for its boots and checks each boot's marker.
	boot := func(step string, m machine, markers ...string) {
		t.Helper()
		for i, b := range runDebianVM(t, lan, dir, m.mac, "tap0", len(markers)) {
			what := fmt.Sprintf("%s: %s boot %d", step, m.name, i+1)
			checkDebianBoot(t, what, b, "ext4", "", false)
			if b.marker != markers[i] {
				t.Errorf("%s: marker %q, want %q", what, b.marker, markers[i])
			}
		}
	}
	type version struct {
		Version  int    `json:"version"`
		State    string `json:"state"`
		Current  bool   `json:"current"`
		Stored   int64  `json:"stored"`
		Parent   int    `json:"parent"`
		Machines []struct {
			MAC        string `json:"mac"`
			Persistent bool   `json:"persistent"`
		} `json:"machines"`
	}
	versions := func() []version {
		var vs []version
		cli.json(&vs, "image", "versions", "lab")
		return vs
	}

	boot("v1", pers, "absent", "present deb-pers")

	// 2. The maintenance machine edits version 2 across a reboot.
	cli.run("image", "edit", "lab", "--machine", maint.name)
	if out, err := cli.tryRun("image", "edit", "lab", "--machine", prod.name); err == nil || !strings.Contains(err.Error(), maint.mac) {
		t.Errorf("a second edit: %v %s, want it refused naming %s", err, out, maint.mac)
	}
	if _, err := cli.tryRun("image", "promote", "lab", "2"); err == nil || !strings.Contains(err.Error(), "commit it first") {
		t.Errorf("promote of the maintenance version: %v, want it refused", err)
	}
	boot("edit", maint, "absent", "present deb-maint")

	// 3. Commit: test sees it, production does not. The VM is off, but
	// the server learns that its NBD session died only from TCP
	// keepalive (about 20 s): until then commit is refused, naming it.
	refused := false
	for end := time.Now().Add(90 * time.Second); ; {
		_, err := cli.tryRun("image", "commit", "lab")
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "is still running image lab version 2") || !strings.Contains(err.Error(), maint.mac) || time.Now().After(end) {
			t.Fatalf("commit: %v", err)
		}
		refused = true
		<-time.After(2 * time.Second) // polling the server's view of the dead session
	}
	t.Logf("commit refused while the maintenance machine's session lingered: %v", refused)
	vs := versions()
	if len(vs) != 2 || vs[1].State != "test" || vs[1].Parent != 1 || !vs[0].Current {
		t.Fatalf("after commit: %+v, want version 2 in test over 1, 1 current", vs)
	}
	t.Logf("version 2 stores %d bytes of a %d byte image", vs[1].Stored, st.Size())
	if vs[1].Stored > st.Size()/8 || vs[1].Stored == 0 {
		t.Errorf("version 2 stores %d bytes; want what the maintenance machine wrote, not the image's %d", vs[1].Stored, st.Size())
	}
	boot("commit", tester, "present deb-maint")
	boot("commit", prod, "absent")

	// 4. Promote: production boots it; the persistent machine keeps v1.
	cli.run("image", "promote", "lab", "2")
	boot("promote", prod, "present deb-maint")
	boot("promote", pers, "present deb-pers")
	vs = versions()
	if len(vs[0].Machines) != 1 || vs[0].Machines[0].MAC != pers.mac || !vs[0].Machines[0].Persistent {
		t.Errorf("after promote, version 1 is held by %+v, want the persistent machine", vs[0].Machines)
	}
	if _, err := cli.tryRun("image", "retire", "lab", "1"); err == nil || !strings.Contains(err.Error(), pers.mac) {
		t.Errorf("retire of the version a persistent machine holds: %v, want it refused naming it", err)
	}

	// 5. Rollback: gone at the next boot.
	cli.run("image", "rollback", "lab")
	boot("rollback", prod, "absent")
	if vs := versions(); !vs[0].Current || vs[1].State != "test" {
		t.Errorf("after rollback: %+v, want 1 current and 2 back in test", vs)
	}
}
