package nbd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// bfConfig is one bootfleet server of the bench: DHCP off, TFTP on a port
// nobody uses, log level warn as a busy server would run; telemetry and the
// rest stay at their defaults.
type bfConfig struct {
	data, ipxe        string
	httpPort, nbdPort int
	profiles          []profile
	machines          []machine
}

// profile roots a stand-in kernel on an imported image.
type profile struct{ name, kernel, image, overlay string }

type machine struct{ mac, name, profile string }

func (c bfConfig) yaml() string {
	var w strings.Builder
	fmt.Fprintf(&w, "server_ip: 127.0.0.1\ndata: %s\ndhcp: {mode: off}\ntftp: {listen: \"127.0.0.1:0\"}\n", c.data)
	fmt.Fprintf(&w, "http: {listen: \"127.0.0.1:%d\"}\nnbd: {listen: \"127.0.0.1:%d\"}\n", c.httpPort, c.nbdPort)
	fmt.Fprintf(&w, "ipxe: {dir: %s}\nlog: {level: warn}\nprofiles:\n", c.ipxe)
	for _, p := range c.profiles {
		fmt.Fprintf(&w, "  %s: {kernel: %s, root: {image: %s, overlay: %s}}\n", p.name, p.kernel, p.image, p.overlay)
	}
	w.WriteString("machines:\n")
	for _, m := range c.machines {
		fmt.Fprintf(&w, "  - {mac: %q, name: %s, profile: %s}\n", m.mac, m.name, m.profile)
	}
	return w.String()
}

// standIns writes the files a config names but no run reads: only boot
// scripts are fetched here, no firmware boots.
func standIns(dir string) (kernel, ipxe string, err error) {
	kernel, ipxe = dir+"/vmlinuz", dir+"/ipxe"
	if err := os.MkdirAll(ipxe, 0o755); err != nil {
		return "", "", err
	}
	for path, body := range map[string]string{kernel: "kernel\n", ipxe + "/ipxe.efi": "efi\n", ipxe + "/undionly.kpxe": "kpxe\n"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return "", "", err
		}
	}
	return kernel, ipxe, nil
}

// bootfleet is one running server and the API it answers on.
type bootfleet struct {
	bin  string
	cfg  bfConfig
	proc *harness.Proc
}

// startBootfleet writes cfg to cfgPath, serves it (env adds variables, for
// A/B runs of settings) and waits for its API.
func startBootfleet(name, bin, cfgPath, logPath string, env []string, cfg bfConfig) (*bootfleet, error) {
	if err := os.WriteFile(cfgPath, []byte(cfg.yaml()), 0o644); err != nil {
		return nil, err
	}
	p, err := harness.Start(name, "", logPath, env, bin, "serve", "-c", cfgPath)
	if err != nil {
		return nil, err
	}
	b := &bootfleet{bin: bin, cfg: cfg, proc: p}
	api := b.url("/api/v1/openapi.json")
	if err := p.WaitReady(10*time.Second, func() error { _, err := get(api); return err }); err != nil {
		p.Stop()
		return nil, err
	}
	return b, nil
}

func (b *bootfleet) url(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", b.cfg.httpPort, path)
}

// importImage stores file as image name, through the server's API, with
// the tool's output appended to logPath.
func (b *bootfleet) importImage(ctx context.Context, name, file, logPath string) error {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, b.bin, "image", "import", "--server", b.url(""), "--data", b.cfg.data, name, file)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		b2, _ := os.ReadFile(logPath)
		return fmt.Errorf("bootfleet image import %s %s: %w (log %s: %s)", name, file, err, logPath, harness.Tail(string(b2), 400))
	}
	return nil
}

// export is the NBD URI a machine's boot script names, which is how a
// booting machine learns it.
func (b *bootfleet) export(mac string) (string, error) {
	script, err := get(b.url("/ipxe/" + strings.ReplaceAll(mac, ":", "-")))
	if err != nil {
		return "", err
	}
	uri, err := exportURI(script)
	if err != nil {
		return "", fmt.Errorf("machine %s: %w", mac, err)
	}
	return uri, nil
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func get(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, harness.Tail(string(body), 200))
	}
	return string(body), nil
}
