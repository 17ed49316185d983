package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// TestTelemetry boots one VM (SeaBIOS + iPXE ROM, the fastest) and checks
// what bootfleet recorded about it: the boot record through the API and the
// CLI, /metrics through the Prometheus text parser, and the dashboard in
// Debian's chromium, with a screenshot in the artifacts.
func TestTelemetry(t *testing.T) {
	parallelVM(t)
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	server := startBootfleet(t, e, lan, dir, "full")
	const mac = "52:54:00:e2:e6:01"
	res := boot(t, e, lan, dir, server, vm{fw: bios, mac: mac, tap: "tap0"})

	web := proxyInto(t, lan, serverIP+":8080")
	token := apiToken(t, dir)

	// The boot record.
	var list struct{ Boots []telemetry.Boot }
	getJSON(t, web+"/api/v1/boots?mac="+mac, token, &list)
	if len(list.Boots) != 1 {
		t.Fatalf("GET /api/v1/boots?mac=%s: %d boots, want 1: %+v", mac, len(list.Boots), list.Boots)
	}
	b := list.Boots[0]
	writeArtifact(t, dir, "boot.json", b)
	checkBootRecord(t, b, res.wall)
	var one telemetry.Boot
	getJSON(t, web+"/api/v1/boots/"+b.ID, token, &one)
	if one.ID != b.ID || len(one.Phases) != len(b.Phases) {
		t.Errorf("GET /api/v1/boots/%s: got %q with %d phases, want the listed boot", b.ID, one.ID, len(one.Phases))
	}

	// The CLI, as an admin on the server runs it.
	data := filepath.Dir(tokenPath(t, dir))
	for _, args := range [][]string{{"boots"}, {"boots", "show", b.ID}} {
		cmd := lan.command(e.bin, append(args, "--server", "http://"+serverIP+":8080", "--data", data)...)
		out, err := cmd.CombinedOutput()
		os.WriteFile(filepath.Join(dir, "cli-"+strings.Join(args, "-")+".txt"), out, 0o644)
		if err != nil || !strings.Contains(string(out), mac) || !strings.Contains(string(out), "complete") {
			t.Errorf("bootfleet %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	checkMetrics(t, dir, web)
	checkDashboard(t, dir, web, token, mac)
}

// checkBootRecord asserts each phase of an iPXE ROM boot is there: DHCP from
// iPXE, the script, kernel and initrd over HTTP with bytes, the OS's DHCP,
// and boot complete, in a plausible time.
func checkBootRecord(t *testing.T, b telemetry.Boot, wall time.Duration) {
	t.Helper()
	if b.State != telemetry.StateComplete || b.End == nil {
		t.Fatalf("boot %s is %s (%s), want complete", b.ID, b.State, b.Reason)
	}
	kinds := map[string]int{}
	for _, p := range b.Phases {
		kinds[p.Kind]++
		if (p.Kind == "http" || p.Kind == "tftp") && (p.Bytes <= 0 || p.Secs < 0) {
			t.Errorf("phase %q: %d bytes in %.2fs, want bytes > 0", p.Name, p.Bytes, p.Secs)
		}
		if p.Offset < 0 || p.Offset > wall.Seconds()+5 {
			t.Errorf("phase %q starts at +%.2fs, outside the boot (%.0fs wall)", p.Name, p.Offset, wall.Seconds())
		}
	}
	// kernel and initrd at least; the script fetch is a milestone.
	if kinds["dhcp"] < 1 || kinds["http"] < 2 || kinds["complete"] != 1 || kinds["milestone"] < 1 {
		t.Errorf("phases by kind %v, want dhcp >= 1, http >= 2 (kernel, initrd), milestone ipxe-script, complete", kinds)
	}
	s := b.Summary
	if s.DownloadBytes < 1<<20 || s.DownloadMBps <= 0 {
		t.Errorf("summary %+v: want more than 1 MiB downloaded at a positive rate", s)
	}
	// Boot complete is first DHCP to DoneURL: within the VM's wall time,
	// and at least the few seconds a kernel needs even under TCG.
	if s.TotalSeconds < 2 || s.TotalSeconds > wall.Seconds()+1 {
		t.Errorf("total boot time %.2fs, want between 2s and the VM's wall time %.1fs", s.TotalSeconds, wall.Seconds())
	}
	if s.DHCPSeconds < 0 || s.DHCPSeconds > s.TotalSeconds {
		t.Errorf("DHCP time %.2fs is outside the boot's %.2fs", s.DHCPSeconds, s.TotalSeconds)
	}
}

// checkMetrics parses /metrics with the Prometheus text parser and looks
// for the boot in it.
func checkMetrics(t *testing.T, dir, web string) {
	t.Helper()
	resp, err := http.Get(web + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	os.WriteFile(filepath.Join(dir, "metrics.txt"), body, 0o644)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse as Prometheus text: %v (saved in metrics.txt)", err)
	}
	value := func(name string, labels ...string) float64 {
		f, ok := fams[name]
		if !ok {
			t.Errorf("/metrics has no %s", name)
			return 0
		}
		var sum float64
	metrics:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.Label {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum
	}
	for _, c := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"bootfleet_dhcp_requests_total", []string{"type", "discover"}, 1},
		{"bootfleet_dhcp_requests_total", []string{"type", "request"}, 1},
		{"bootfleet_transfers_total", []string{"proto", "http", "result", "ok"}, 2},
		{"bootfleet_transfer_bytes_total", []string{"proto", "http"}, 1 << 20},
		{"bootfleet_boots_started_total", nil, 1},
		{"bootfleet_boots_completed_total", nil, 1},
		{"bootfleet_boot_duration_seconds", nil, 1},
	} {
		if v := value(c.name, c.labels...); v < c.min {
			t.Errorf("/metrics %s%v = %v, want >= %v", c.name, c.labels, v, c.min)
		}
	}
}

// checkDashboard loads the dashboard in headless chromium, finds the
// machine's row and its timeline bars, and saves a screenshot.
func checkDashboard(t *testing.T, dir, web, token, mac string) {
	t.Helper()
	ctx := startBrowser(t, 90*time.Second)

	row := fmt.Sprintf(`#fleet tbody tr[data-mac=%q]`, mac)
	bars := fmt.Sprintf(`#timeline[data-mac=%q] .bar.http`, mac)
	shoot := func() { screenshot(ctx, dir, "dashboard.png") }
	// Without the token the page must say it needs one.
	if err := chromedp.Do(ctx, chromedp.Navigate(web+"/"), chromedp.WaitVisible(`#auth`)); err != nil {
		t.Fatalf("dashboard at %s: no token banner: %v", web, err)
	}
	authText, _ := chromedp.Run(ctx, chromedp.Text(`#auth`))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`localStorage.setItem("bootfleet-token", %q), true`, token)))
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(row), chromedp.WaitVisible(bars))
	}
	shoot()
	if err != nil {
		t.Fatalf("dashboard at %s: %v (looking for %s and %s)", web, err, row, bars)
	}
	nbars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline .bar").length`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(authText, "token") {
		t.Errorf("without a token the page says %q; want it to ask for the API token", authText)
	}
	if nbars < 4 {
		t.Errorf("timeline has %d bars, want dhcp, kernel, initrd and boot complete at least", nbars)
	}
	t.Logf("dashboard: %d timeline bars; screenshot in %s", nbars, filepath.Join(dir, "dashboard.png"))
}

// proxyInto listens on host loopback and forwards each connection to addr
// inside ns, so the test and chromium reach the server without touching
// the host's network: only this process crosses into the namespace.
func proxyInto(t *testing.T, ns *netns, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := dialIn(ns.name, addr)
				if err != nil {
					t.Logf("proxy into %s: %v", ns.name, err)
					return
				}
				defer s.Close()
				go func() { io.Copy(s, c); s.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, s)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// dialIn opens a TCP connection from inside network namespace name. The
// socket keeps its namespace after the thread switches back.
func dialIn(name, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer self.Close()
		target, err := os.Open("/var/run/netns/" + name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", name, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and dies with this goroutine
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// tokenPath finds the server's api-token from the data directory in the
// config startBootfleet wrote.
func tokenPath(t *testing.T, dir string) string {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(dir, "bootfleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(cfg), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			return filepath.Join(strings.TrimSpace(d), "api-token")
		}
	}
	t.Fatal("bootfleet.yaml has no data: line")
	return ""
}

func apiToken(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(tokenPath(t, dir))
	if err != nil {
		t.Fatalf("API token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

func writeArtifact(t *testing.T, dir, name string, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
