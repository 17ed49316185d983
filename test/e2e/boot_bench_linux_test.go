package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/ipxe"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// BenchmarkBoot measures whole VM boots, QEMU start to the VM's init
// printing BOOTFLEET-DONE (after its GET of the done= URL returned 200), for
// the same VM, kernel, initrd and command line served by:
//
//   - direct: no network boot; QEMU loads the kernel and initrd itself
//     (-kernel). The init still takes a DHCP lease from dnsmasq and calls its
//     done= URL, so this is the floor any boot server can reach.
//   - bootfleet: full DHCP mode with the default config (ipv6_ra: auto).
//   - dnsmasq+http: what admins run today; dnsmasq for DHCP and TFTP
//     chainloading iPXE as ipxe.org documents it, python3 -m http.server
//     for the script, kernel and initrd.
//   - dnsmasq+http tuned: the same plus option 175.176=1 (iPXE no-pxedhcp).
//
// It writes BENCHMARKS-boot.md at the repository root. Run it with
//
//	cd test/e2e && go test -run=NONE -bench=Boot -benchtime=1x -timeout=60m .
//
// BOOTFLEET_BENCH_ROUNDS (default 3) sets the boots per stack and firmware;
// BOOTFLEET_BENCH_FW (default "bios,uefi") the firmware. Rounds alternate
// the order of the stacks, and boots run one at a time.
func BenchmarkBoot(b *testing.B) {
	e := needEnv(b)
	rounds := 3
	if s := os.Getenv("BOOTFLEET_BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 20 {
			b.Fatalf("BOOTFLEET_BENCH_ROUNDS: want 1-20, got %q", s)
		}
		rounds = n
	}
	var fws []firmware
	for _, s := range strings.Split(envOr("BOOTFLEET_BENCH_FW", "bios,uefi"), ",") {
		fw := firmware(strings.TrimSpace(s))
		if fw != bios && fw != uefi {
			b.Fatalf("BOOTFLEET_BENCH_FW: want a list of bios and uefi, got %q", s)
		}
		fws = append(fws, fw)
	}

	rep := bootReport{started: time.Now(), rounds: rounds, machine: machineInfo()}
	for _, fw := range fws {
		for r := 0; r < rounds; r++ {
			order := append([]bootStack(nil), benchStacks...)
			if r%2 == 1 {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			for _, s := range order {
				name := fmt.Sprintf("%s/%s/%d", fw, s.key, r+1)
				ok := b.Run(name, func(b *testing.B) {
					run := benchBoot(b, e, fw, s)
					run.round = r + 1
					b.ReportMetric(run.done.Seconds(), "s/boot")
					rep.runs = append(rep.runs, run)
				})
				if !ok {
					b.Fatalf("%s failed; BENCHMARKS-boot.md not written", name)
				}
			}
		}
	}
	rep.elapsed = time.Since(rep.started)
	path := filepath.Join(e.repo, "BENCHMARKS-boot.md")
	if err := os.WriteFile(path, []byte(rep.markdown(fws)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", path)
}

// A bootStack is one way of serving the boot.
type bootStack struct {
	key   string // sub-benchmark name
	title string // column in the report
	// start runs the servers on lan and returns the process whose output
	// shows the first script request, and the substrings of that line
	// (none for direct). cmdline is set for a direct kernel boot.
	start func(b *testing.B, e *env, lan *netns, dir string) (web *proc, scriptLine []string, cmdline string)
}

var benchStacks = []bootStack{
	{key: "direct", title: "direct -kernel (floor)", start: startDirect},
	{key: "bootfleet", title: "bootfleet", start: startBootfleetStack},
	{key: "dnsmasq", title: "dnsmasq+http", start: peerStack(false)},
	{key: "dnsmasq-tuned", title: "dnsmasq+http tuned", start: peerStack(true)},
}

// peerCmdline is defaultProfileKeys' command line with a static done= URL:
// a file the web server serves.
const peerCmdline = "console=ttyS0 quiet panic=-1 bf.profile=" + defaultProfile + " done=http://" + serverIP + ":8080/done"

// peerDnsmasqConf is the peer's dnsmasq configuration, one option a line as
// in dnsmasq.conf; each is passed as --LINE. It is ipxe.org's chainloading
// recipe (https://ipxe.org/howto/chainloading, "dnsmasq"): PXE ROMs get
// undionly.kpxe (BIOS) or ipxe.efi (UEFI, client-arch 7) over TFTP, and
// iPXE, which sends option 175, gets the script URL.
var peerDnsmasqConf = []string{
	"interface=" + bridge,
	"dhcp-range=10.213.0.100,10.213.0.200,255.255.255.0,1h",
	"enable-tftp",
	"tftp-root=" + ipxeDir,
	"dhcp-match=set:ipxe,175",
	"dhcp-match=set:efi64,option:client-arch,7",
	"dhcp-boot=tag:!ipxe,tag:efi64,ipxe.efi",
	"dhcp-boot=tag:!ipxe,tag:!efi64,undionly.kpxe",
	"dhcp-boot=tag:ipxe,http://" + serverIP + ":8080/boot.ipxe",
}

// peerTuning is the tuned peer's extra line: iPXE setting no-pxedhcp
// (175.176=1), so iPXE does not wait for ProxyDHCP offers.
const peerTuning = "dhcp-option=encap:175,176,1b"

// peerScript is the iPXE script the peer's web server serves: the one
// bootfleet renders, with static URLs.
func peerScript() string {
	base := "http://" + serverIP + ":8080/"
	return ipxe.Script(ipxe.Boot{
		Kernel:  base + "vmlinuz",
		Initrds: []ipxe.Initrd{{URL: base + "initrd.img"}},
		Cmdline: peerCmdline,
	})
}

func startBootfleetStack(b *testing.B, e *env, lan *netns, dir string) (*proc, []string, string) {
	return startBootfleet(b, e, lan, dir, "full"), []string{`msg="script served"`}, ""
}

// startDirect serves the floor: DHCP for the init's lease and the done file.
// --no-ping: dnsmasq otherwise probes a new address for about 3 s before
// offering it, which the network boots pay during the firmware's DHCP
// (the init then renews the address) and the floor should not pay at all.
func startDirect(b *testing.B, e *env, lan *netns, dir string) (*proc, []string, string) {
	runDnsmasq(b, lan, dir, "--interface="+bridge, "--no-ping", "--dhcp-range=10.213.0.100,10.213.0.200,255.255.255.0,1h")
	return startStaticHTTP(b, e, lan, dir), nil, peerCmdline
}

func peerStack(tuned bool) func(b *testing.B, e *env, lan *netns, dir string) (*proc, []string, string) {
	return func(b *testing.B, e *env, lan *netns, dir string) (*proc, []string, string) {
		conf := append([]string(nil), peerDnsmasqConf...)
		if tuned {
			conf = append(conf, peerTuning)
		}
		args := make([]string, len(conf))
		for i, l := range conf {
			args[i] = "--" + l
		}
		os.WriteFile(filepath.Join(dir, "dnsmasq.conf"), []byte(strings.Join(conf, "\n")+"\n"), 0o644)
		runDnsmasq(b, lan, dir, args...)
		return startStaticHTTP(b, e, lan, dir), []string{"GET /boot.ipxe"}, ""
	}
}

// startStaticHTTP serves dir/www (the script, the test image's kernel and
// initrd, and a done file) with python3 -m http.server on serverIP:8080.
func startStaticHTTP(b *testing.B, e *env, lan *netns, dir string) *proc {
	b.Helper()
	www := filepath.Join(dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string]string{"boot.ipxe": peerScript(), "done": "ok\n"} {
		if err := os.WriteFile(filepath.Join(www, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for name, src := range map[string]string{"vmlinuz": e.vmlinuz, "initrd.img": e.initrd} {
		if err := os.Symlink(src, filepath.Join(www, name)); err != nil {
			b.Fatal(err)
		}
	}
	// -u: unbuffered, so each request's log line arrives when it is served.
	p := startProc(b, "http.server", lan.command("python3", "-u", "-m", "http.server", "8080",
		"--bind", serverIP, "--directory", www), filepath.Join(dir, "http.log"))
	if err := lan.waitTCP(serverIP, 8080, 15*time.Second, p.alive); err != nil {
		b.Fatalf("python3 -m http.server did not come up: %v\n%s", err, p.out.tail(20))
	}
	return p
}

// bootRun is one measured boot. Durations count from QEMU's start; zero
// means the event does not apply (no script in a direct boot).
type bootRun struct {
	fw     firmware
	stack  string // bootStack.key
	round  int
	script time.Duration // the web server saw the script request
	init   time.Duration // the VM's init printed BOOTFLEET-INIT
	done   time.Duration // the VM's init printed BOOTFLEET-DONE
}

// benchBoot boots one VM on a fresh LAN served by s and times it.
func benchBoot(b *testing.B, e *env, fw firmware, s bootStack) bootRun {
	dir := artifactDir(b)
	lan := newLAN(b)
	lan.addTap(b, "tap0")
	web, scriptLine, cmdline := s.start(b, e, lan, dir)

	start := time.Now()
	q := startVM(b, e, lan, dir, vm{fw: fw, mac: "52:54:00:e2:eb:01", tap: "tap0", cmdline: cmdline})
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout(b))
	defer cancel()
	_, err := q.waitLine(ctx, func(line string) (bool, error) {
		if err := consoleFailure(line); err != nil {
			return false, err
		}
		return strings.HasPrefix(line, "BOOTFLEET-DONE"), nil
	})
	if err != nil {
		b.Fatalf("%s boot from %s: %v (after %v)\n--- console ---\n%s\n--- %s ---\n%s\n--- artifacts in %s",
			fw, s.key, err, time.Since(start).Round(time.Second), q.out.tail(30), web.name, web.out.tail(20), dir)
	}
	run := bootRun{fw: fw, stack: s.key}
	since := func(l *lineLog, subs ...string) time.Duration {
		if _, at, ok := l.firstMatch(subs...); ok {
			return at.Sub(start)
		}
		return 0
	}
	run.done = since(q.out, "BOOTFLEET-DONE")
	run.init = since(q.out, "BOOTFLEET-INIT")
	if scriptLine != nil {
		if run.script = since(web.out, scriptLine...); run.script == 0 {
			b.Fatalf("%s never logged the script request (%q)", web.name, scriptLine)
		}
	}
	select {
	case <-q.exited:
	case <-time.After(15 * time.Second):
		q.stop()
	}
	b.Logf("%s %s: script %.2fs, init %.2fs, done %.2fs", fw, s.key, run.script.Seconds(), run.init.Seconds(), run.done.Seconds())
	return run
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// machineInfo describes the host and tool versions for the report.
func machineInfo() []string {
	ctx := context.Background()
	return []string{
		"Host: " + harness.DescribeHost(ctx).String(),
		"QEMU: " + harness.FirstLine(ctx, "qemu-system-x86_64", "--version") + ", -accel tcg -m 512 -smp 1",
		"dnsmasq: " + harness.FirstLine(ctx, "dnsmasq", "--version"),
		"Python: " + harness.FirstLine(ctx, "python3", "--version"),
		"Go: " + harness.FirstLine(ctx, "go", "version"),
	}
}
