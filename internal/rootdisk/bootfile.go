package rootdisk

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/durable"
)

// Each machine's latest boot is also kept in Data/boots/MAC.json, so a
// server that restarts (an upgrade, a crash) still knows the exports its
// running machines were given: their agents reconnect to the same export
// and carry on, instead of hanging until someone power-cycles the lab.
// The files hold secrets and are readable by the server's user only.

// bootRecord is the JSON form of a boot.
type bootRecord struct {
	MAC     string    `json:"mac"`
	Secret  string    `json:"secret"`
	Image   string    `json:"image"`
	SHA256  string    `json:"sha256"`
	Overlay string    `json:"overlay"`
	Issued  time.Time `json:"issued"`
	Dir     string    `json:"dir,omitempty"` // the overlay of an image version edited
}

func (m *Manager) bootDir() string { return filepath.Join(m.cfg.Data, "boots") }

func (m *Manager) bootPath(mac net.HardwareAddr) string {
	return filepath.Join(m.bootDir(), macPath(mac)+".json")
}

// saveBoot writes b durably (temporary file, fsync, rename, fsync of the
// directory) before the script that names it is served.
func (m *Manager) saveBoot(mac net.HardwareAddr, b *boot) error {
	raw, err := json.Marshal(bootRecord{MAC: mac.String(), Secret: b.secret, Image: b.image, SHA256: b.sha, Overlay: b.mode.String(), Issued: b.issued, Dir: b.dir})
	if err != nil {
		return fmt.Errorf("rootdisk: encode boot of %s: %w", mac, err)
	}
	if err := os.MkdirAll(m.bootDir(), 0o700); err != nil {
		return fmt.Errorf("rootdisk: boot records: %w", err)
	}
	if err := durable.WriteFile(m.bootPath(mac), raw, 0o600); err != nil {
		return fmt.Errorf("rootdisk: boot record of %s: %w", mac, err)
	}
	return nil
}

// forgetBoot removes mac's boot record.
func (m *Manager) forgetBoot(mac net.HardwareAddr) error {
	if err := os.Remove(m.bootPath(mac)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rootdisk: remove boot record of %s: %w", mac, err)
	}
	return nil
}

// loadBoots reads the boot records of a previous run. A record that is
// damaged, or whose image content is gone, is logged and skipped: its
// machine needs a reboot, as it would have without the record.
func (m *Manager) loadBoots() error {
	paths, err := filepath.Glob(filepath.Join(m.bootDir(), "*.json"))
	if err != nil {
		return fmt.Errorf("rootdisk: boot records: %w", err)
	}
	for _, p := range paths {
		mac, b, err := m.readBoot(p)
		if err != nil {
			m.log.Warn("boot record skipped; the machine must reboot to get a new export", "file", p, "err", err)
			continue
		}
		m.boot[mac.String()] = b
	}
	if len(m.boot) > 0 {
		m.log.Info("machine exports restored from the previous run", "machines", len(m.boot))
	}
	return nil
}

func (m *Manager) readBoot(path string) (net.HardwareAddr, *boot, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var r bootRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("want a JSON boot record: %w", err)
	}
	mac, err := net.ParseMAC(r.MAC)
	if err != nil || m.bootPath(mac) != path {
		return nil, nil, fmt.Errorf("record names MAC %q, which does not match its file name", r.MAC)
	}
	mode, err := blockstore.ParseMode(r.Overlay)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Secret) != SecretLen || strings.Trim(r.Secret, "0123456789abcdef") != "" {
		return nil, nil, fmt.Errorf("want a secret of %d hex digits, got %d characters", SecretLen, len(r.Secret))
	}
	if !m.cfg.Blobs.Has(r.SHA256) {
		return nil, nil, fmt.Errorf("image content %.12s of image %s is no longer in the data directory", r.SHA256, r.Image)
	}
	if r.Dir != "" && filepath.Dir(r.Dir) != m.editRoot() {
		return nil, nil, fmt.Errorf("record names overlay %q, outside %s", r.Dir, m.editRoot())
	}
	return mac, &boot{secret: r.Secret, image: r.Image, sha: r.SHA256, mode: mode, issued: r.Issued, dir: r.Dir}, nil
}
