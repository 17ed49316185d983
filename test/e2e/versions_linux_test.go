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

// TestImageVersions: the update workflow of issue 33 on the Debian 12
// image. The image's report unit writes its machine's name to
// /var/bf-marker at every boot and says whether the marker was there and
// whether the package bf-e2e is installed, so a version's content shows in
// what a machine reports:
//
//  1. import v1; a persistent machine boots it twice (its own marker);
//  2. image edit with a maintenance VM, which writes its marker, fetches
//     a .deb the test built from bootfleet's /files/ and installs it with
//     dpkg -i, reboots into the same read-write version, then powers off;
//  3. commit: a test-channel VM finds the maintenance marker and the
//     package, a production VM neither; the version stores about what was
//     written;
//  4. promote: the production VM finds it at its next boot;
//  5. rollback: it is gone at the boot after;
//
// and through all of it the persistent machine keeps v1 with its own
// marker.
func TestImageVersions(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	n := needNBD(t, e)
	needDebianTools(t)
	dir := artifactDir(t)
	work := t.TempDir()
	disk := filepath.Join(work, "lab.raw")
	report := strings.Replace(debianReport, "\nif [ -e /var/bf-marker ]; then", "\n"+debReport+"if [ -e /var/bf-marker ]; then", 1)
	if report == debianReport {
		t.Fatal("debianReport has no marker test to put the package report before")
	}
	makeDebianDiskWith(t, e, disk, report, debianUnit, "--fs", "ext4", "--table", "gpt")
	st, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}

	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	data, files := filepath.Join(t.TempDir(), "data"), t.TempDir()
	buildTestDeb(t, filepath.Join(files, "bf-e2e.deb"))
	server := startBootfleetConfig(t, e, lan, dir, nbdRootConfig, map[string]string{"Data": data, "NBDInitrd": n.initrd, "TFTPRoot": files})
	if err := lan.waitTCP(serverIP, 10809, 10*time.Second, server.alive); err != nil {
		t.Fatalf("bootfleet's NBD server: %v\n%s", err, server.out.tail(30))
	}
	cli := &bootfleetCLI{t: t, e: e, ns: lan, data: data, log: filepath.Join(dir, "cli.log")}
	cli.run("image", "import", "lab", disk)
	initrd, vmlinuz := filepath.Join(work, "initrd.img"), filepath.Join(work, "vmlinuz")
	cli.run("initramfs", "build", "--image", "lab", "--agent", n.agent, "--out", initrd, "--kernel-out", vmlinuz)
	const cmdline = "console=ttyS0 quiet systemd.show_status=1 panic=-1 bf.name={{ .Name }} done={{ .DoneURL }}"
	// Only lab-maint's machines are told where the package is.
	for _, p := range []struct{ name, overlay, channel, cmdline string }{
		{"lab-prod", "ephemeral", "production", cmdline}, {"lab-test", "ephemeral", "test", cmdline},
		{"lab-pers", "persistent", "production", cmdline},
		{"lab-maint", "ephemeral", "production", cmdline + " bf.deb=http://" + serverIP + ":8080/files/bf-e2e.deb"},
	} {
		cli.run("profile", "add", p.name, "--kernel", vmlinuz, "--initrd", initrd, "--cmdline", p.cmdline,
			"--root-image", "lab", "--overlay", p.overlay, "--root-channel", p.channel)
	}
	type machine struct{ mac, name, profile string }
	maint := machine{"52:54:00:de:c1:01", "deb-maint", "lab-maint"}
	tester := machine{"52:54:00:de:c1:02", "deb-test", "lab-test"}
	prod := machine{"52:54:00:de:c1:03", "deb-prod", "lab-prod"}
	pers := machine{"52:54:00:de:c1:04", "deb-pers", "lab-pers"}
	for _, m := range []machine{maint, tester, prod, pers} {
		cli.run("machine", "add", "--mac", m.mac, "--name", m.name, "--profile", m.profile)
	}
	// boot runs m for its boots and checks what each boot saw.
	type seen struct{ marker, pkg string }
	boot := func(step string, m machine, want ...seen) {
		t.Helper()
		for i, b := range runDebianVM(t, lan, dir, m.mac, "tap0", len(want)) {
			what := fmt.Sprintf("%s: %s boot %d", step, m.name, i+1)
			checkDebianBoot(t, what, b, "ext4", "", false)
			if b.marker != want[i].marker || b.pkg != want[i].pkg {
				t.Errorf("%s: marker %q and package %q, want %q and %q", what, b.marker, b.pkg, want[i].marker, want[i].pkg)
			}
		}
	}
	v1 := func(marker string) seen { return seen{marker, debAbsent} }
	v2 := func(marker string) seen { return seen{marker, debInstalled} }
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

	boot("v1", pers, v1("absent"), v1("present deb-pers"))

	// 2. The maintenance machine edits version 2 across a reboot.
	cli.run("image", "edit", "lab", "--machine", maint.name)
	if out, err := cli.tryRun("image", "edit", "lab", "--machine", prod.name); err == nil || !strings.Contains(err.Error(), maint.mac) {
		t.Errorf("a second edit: %v %s, want it refused naming %s", err, out, maint.mac)
	}
	if _, err := cli.tryRun("image", "promote", "lab", "2"); err == nil || !strings.Contains(err.Error(), "commit it first") {
		t.Errorf("promote of the maintenance version: %v, want it refused", err)
	}
	// Its first boot installs the package, its second finds it installed.
	boot("edit", maint, v1("absent"), v2("present deb-maint"))

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
	boot("commit", tester, v2("present deb-maint"))
	boot("commit", prod, v1("absent"))

	// 4. Promote: production boots it; the persistent machine keeps v1.
	cli.run("image", "promote", "lab", "2")
	boot("promote", prod, v2("present deb-maint"))
	boot("promote", pers, v1("present deb-pers"))
	vs = versions()
	if len(vs[0].Machines) != 1 || vs[0].Machines[0].MAC != pers.mac || !vs[0].Machines[0].Persistent {
		t.Errorf("after promote, version 1 is held by %+v, want the persistent machine", vs[0].Machines)
	}
	if _, err := cli.tryRun("image", "retire", "lab", "1"); err == nil || !strings.Contains(err.Error(), pers.mac) {
		t.Errorf("retire of the version a persistent machine holds: %v, want it refused naming it", err)
	}

	// 5. Rollback: gone at the next boot.
	cli.run("image", "rollback", "lab")
	boot("rollback", prod, v1("absent"))
	if vs := versions(); !vs[0].Current || vs[1].State != "test" {
		t.Errorf("after rollback: %+v, want 1 current and 2 back in test", vs)
	}
}

// debReport goes into the image's report before its marker test: it says
// whether bf-e2e is installed, with the file and the command it ships, and
// when the kernel command line has bf.deb=http://HOST:PORT/PATH and the
// package is not installed, fetches that .deb (bash alone: the image has
// no HTTP client) and installs it with dpkg -i.
const debReport = `pkg=$(dpkg-query -W -f='${Status} ${Version}' bf-e2e 2>/dev/null) || pkg=absent
echo "BOOTFLEET-PKG: $pkg file=$(cat /usr/share/bf-e2e/marker 2>/dev/null || echo none) bin=$(bf-e2e-hello 2>/dev/null || echo none)"
deb=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^bf\.deb=//p')
if [ -n "$deb" ] && [ "$pkg" = absent ]; then
  rest=${deb#http://}
  hostport=${rest%%/*}
  if exec 4<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; then
    printf 'GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n' "${rest#*/}" "$hostport" >&4
    read -r status <&4
    # bash reads a socket a byte at a time: the body is what is left.
    while IFS= read -r line <&4 && [ -n "${line%$'\r'}" ]; do :; done
    cat <&4 >/tmp/bf-e2e.deb
    exec 4>&-
    echo "BOOTFLEET-DEB: ${status%$'\r'} $(stat -c %s /tmp/bf-e2e.deb) bytes"
    dpkg -i /tmp/bf-e2e.deb && sync
  fi
fi
`

// What debReport says before and after bf-e2e is installed.
const (
	debAbsent    = "absent file=none bin=none"
	debInstalled = "install ok installed 1.0-1 file=bf-e2e 1.0-1 bin=hello from bf-e2e"
)

// buildTestDeb builds bf-e2e_1.0-1_all.deb at out: a marker file and a
// command, the smallest package that shows dpkg installed it.
func buildTestDeb(t *testing.T, out string) {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // the package's "./", which dpkg-deb records
		t.Fatal(err)
	}
	for path, f := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"DEBIAN/control": {"Package: bf-e2e\nVersion: 1.0-1\nArchitecture: all\nMaintainer: bootfleet e2e <e2e@bootfleet.invalid>\n" +
			"Description: bootfleet e2e test package\n a file and a command that a maintenance machine installs\n", 0o644},
		"usr/share/bf-e2e/marker": {"bf-e2e 1.0-1\n", 0o644},
		"usr/bin/bf-e2e-hello":    {"#!/bin/sh\necho hello from bf-e2e\n", 0o755},
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, b)
	}
}
