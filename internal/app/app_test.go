package app

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"

	"github.com/bootfleet/bootfleet/internal/config"
)

// syncBuffer is shared with the other packages' tests.
type syncBuffer = testutil.SyncBuffer

func testConfig(t *testing.T, httpAddr string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	kernel := filepath.Join(dir, "vmlinuz")
	ipxeDir := filepath.Join(dir, "ipxe")
	if err := os.Mkdir(ipxeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{
		kernel:                                  "kernel",
		filepath.Join(ipxeDir, "ipxe.efi"):      "efi",
		filepath.Join(ipxeDir, "undionly.kpxe"): "kpxe",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	y := `
server_ip: 127.0.0.1
data: ` + filepath.Join(dir, "data") + `
dhcp: {mode: off}
tftp: {listen: "127.0.0.1:0"}
http: {listen: "` + httpAddr + `"}
nbd: {listen: "127.0.0.1:0"}
multicast: {mode: off}
ipxe: {dir: ` + ipxeDir + `}
default_profile: linux
profiles:
  linux: {kernel: ` + kernel + `, cmdline: "done={{ .DoneURL }}"}
`
	c, err := config.Parse(strings.NewReader(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunServesAndStopsCleanly(t *testing.T) {
	addr := testutil.FreeAddr(t)
	c := testConfig(t, addr)
	r := startRun(t, c)

	var body string
	testutil.Eventually(t, 5*time.Second, "the iPXE script", func() error {
		resp, err := http.Get("http://" + addr + "/ipxe/52-54-00-00-00-01")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	if want := "done=http://" + addr + "/done/52-54-00-00-00-01"; !strings.Contains(body, want) {
		t.Fatalf("script %q lacks %q", body, want)
	}
	if _, err := os.Stat(c.Data); err != nil {
		t.Fatalf("data directory not created: %v", err)
	}
	// The API is mounted on the same server and needs the token from data/.
	tok, err := os.ReadFile(filepath.Join(c.Data, "api-token"))
	if err != nil {
		t.Fatalf("API token file: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(c.Data, "api-token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("API token file: %v, %v; want mode 0600", fi, err)
	}
	for _, tt := range []struct {
		name, token string
		want        int
	}{{"no token", "", http.StatusUnauthorized}, {"token", strings.TrimSpace(string(tok)), http.StatusOK}} {
		req, err := http.NewRequest("GET", "http://"+addr+"/api/v1/machines", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Fatalf("%s: GET /api/v1/machines = %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if !strings.Contains(r.logs.String(), "bootfleet stopped") {
		t.Fatalf("no stop line in logs:\n%s", r.logs)
	}
}

func TestRunFailsFastWithClearErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"http port taken", func(c *config.Config) { c.HTTP.Listen = taken.Addr().String() }, "set http.listen"},
		{"tftp address bad", func(c *config.Config) { c.TFTP.Listen = "256.0.0.1:69" }, "tftp"},
		{"nbd port taken", func(c *config.Config) { c.NBD.Listen = taken.Addr().String() }, "set nbd.listen"},
		{"no ipxe binary", func(c *config.Config) { c.IPXE.EFIBinary = "snponly.efi" }, "snponly.efi"},
		{"missing interface", func(c *config.Config) { c.ServerIP = ""; c.Interface = "bf-nope0" }, `interface "bf-nope0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(t, testutil.FreeAddr(t))
			tt.mutate(c)
			// Run fails by itself: the wait is for that, not for a cancel.
			if err := startRun(t, c).wait(t, 10*time.Second); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestTelemetryOff: with telemetry off the servers report no transfers,
// while /metrics still answers.
func TestTelemetryOff(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			addr := testutil.FreeAddr(t)
			c := testConfig(t, addr)
			c.Telemetry = mode
			c.API.OpenReads = true
			startRun(t, c)
			get := func(path string) string {
				var last error
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					resp, err := http.Get("http://" + addr + path)
					if err != nil {
						last = err
						continue
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Fatalf("GET %s: read the body: %v", path, err)
					}
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
					}
					return string(b)
				}
				t.Fatalf("GET %s: %v", path, last)
				return ""
			}
			get("/ipxe/52-54-00-00-00-01")
			get("/profiles/linux/kernel?mac=52-54-00-00-00-01")
			get("/done/52-54-00-00-00-01")
			metrics := get("/metrics")
			recorded := strings.Contains(metrics, `bootfleet_transfers_total{proto="http",result="ok"} 1`)
			if recorded != (mode == "on") {
				t.Fatalf("telemetry %s: HTTP transfer recorded = %v", mode, recorded)
			}
		})
	}
}
