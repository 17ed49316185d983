package e2e

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDebianPackage builds the package with `make deb`, installs it with
// dpkg, checks what it installed and that systemd accepts the unit
// (systemd-analyze verify), then runs the unit's ExecStart as the unit
// would: as the bootfleet user with exactly the unit's capabilities and no
// new privileges, in a namespace, with DHCP, TFTP and HTTP up. PID 1 here
// is not systemd, so systemctl cannot start it; setpriv reproduces what the
// unit asks of systemd. Finally it purges the package.
func TestDebianPackage(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	for _, tool := range []string{"dpkg", "dpkg-deb", "setpriv", "systemd-analyze", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ciMode {
				t.Fatalf("%s missing (scripts/deps.sh installs it): %v", tool, err)
			}
			t.Skipf("%s missing: %v", tool, err)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "bootfleet").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skip("a bootfleet package is already installed here; the test installs and purges its own")
	}
	_, lookupErr := user.Lookup("bootfleet")
	userExisted := lookupErr == nil
	dataBefore := exists("/var/lib/bootfleet")
	dir := artifactDir(t)

	out := t.TempDir()
	mustRun(t, e.repo, "make", "deb")
	debs, _ := filepath.Glob(filepath.Join(e.repo, "dist", "bootfleet_*_amd64.deb"))
	if len(debs) == 0 {
		t.Fatal("make deb wrote no dist/bootfleet_*_amd64.deb")
	}
	deb := debs[len(debs)-1]
	mustRun(t, out, "dpkg", "-i", deb)
	t.Cleanup(func() {
		exec.Command("dpkg", "--purge", "bootfleet").Run()
		// Only what this test made goes: the package keeps both by design.
		if !userExisted {
			exec.Command("deluser", "--system", "bootfleet").Run()
			exec.Command("delgroup", "--system", "bootfleet").Run()
		}
		if !dataBefore {
			os.RemoveAll("/var/lib/bootfleet")
		}
	})

	for _, f := range []string{"/usr/bin/bootfleet", "/usr/lib/bootfleet/bootfleet-agent",
		"/etc/bootfleet/bootfleet.yaml", "/lib/systemd/system/bootfleet.service"} {
		if !exists(f) {
			t.Errorf("the package did not install %s", f)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Conffiles}", "bootfleet").Output(); err != nil || !strings.Contains(string(out), "/etc/bootfleet/bootfleet.yaml") {
		t.Errorf("/etc/bootfleet/bootfleet.yaml is not a conffile: %s %v", out, err)
	}
	u, err := user.Lookup("bootfleet")
	if err != nil {
		t.Fatalf("postinst made no bootfleet user: %v", err)
	}
	if st, err := os.Stat("/var/lib/bootfleet"); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("/var/lib/bootfleet: %v, mode %v; want 0750, owned by bootfleet", err, st.Mode().Perm())
	}
	if v, err := exec.Command("/usr/bin/bootfleet", "version").Output(); err != nil || !strings.HasPrefix(string(v), "bootfleet ") {
		t.Errorf("bootfleet version: %q %v", v, err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/bootfleet.service").CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify bootfleet.service: %v\n%s", err, out)
	}

	// The unit's ExecStart with the unit's user and capabilities.
	unit := readUnit(t, "/lib/systemd/system/bootfleet.service")
	caps := strings.ToLower(strings.ReplaceAll(unit["AmbientCapabilities"], "CAP_", ""))
	capList := "+" + strings.Join(strings.Fields(caps), ",+")
	lan := newLAN(t)
	cfg := filepath.Join(dir, "bootfleet.yaml")
	os.WriteFile(cfg, []byte(`interface: `+bridge+`
server_ip: `+serverIP+`
data: /var/lib/bootfleet
`+fullDHCPKeys+`tftp: {listen: ":69"}
http: {listen: ":8080"}
ipxe: {dir: `+e.ipxeDir+`}
default_profile: p
profiles:
  p: {kernel: `+e.vmlinuz+`, initrd: [`+e.initrd+`]}
`), 0o644)
	argv := []string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups",
		"--inh-caps=-all," + capList, "--ambient-caps=-all," + capList, "--bounding-set=-all," + capList,
		"--no-new-privs", "/usr/bin/bootfleet", "serve", "--config", cfg}
	if unit["User"] != "bootfleet" || !strings.Contains(unit["ExecStart"], "/usr/bin/bootfleet serve") {
		t.Fatalf("unit runs %q as %q; want /usr/bin/bootfleet serve as bootfleet", unit["ExecStart"], unit["User"])
	}
	server := startProc(t, "bootfleet-deb", lan.command(argv[0], argv[1:]...), filepath.Join(dir, "bootfleet.log"))
	if err := lan.waitTCP(serverIP, 8080, 15*time.Second, server.alive); err != nil {
		t.Fatalf("bootfleet as the unit runs it did not come up: %v\n%s", err, server.out.tail(30))
	}
	listening, _ := lan.command("ss", "-Hlunp").CombinedOutput()
	for _, port := range []string{":67 ", ":69 "} {
		if !strings.Contains(string(listening), port) {
			t.Errorf("nothing listens on UDP %s with the unit's capabilities:\n%s\n%s", port, listening, server.out.tail(20))
		}
	}
	web := proxyInto(t, lan, serverIP+":8080")
	resp, err := http.Get(web + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /metrics from the packaged server: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if st, err := os.Stat("/var/lib/bootfleet/api-token"); err != nil {
		t.Errorf("the packaged server wrote no api-token in its data directory: %v", err)
	} else if uid := fileUID(st); uid != u.Uid {
		t.Errorf("api-token owned by uid %s, want bootfleet's %s", uid, u.Uid)
	}
}

// readUnit reads the [Service] keys of a systemd unit file.
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			keys[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return keys
}

func mustRun(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// fileUID is the owner of the file st describes, as user.User.Uid spells it.
func fileUID(st os.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return strconv.Itoa(int(s.Uid))
	}
	return "?"
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
