package rootdisk

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Use is a machine of this server that reads image content.
type Use struct {
	MAC string
	// Persistent says the machine's persistent overlay was made on the
	// content: it stays on it until machine reset. Otherwise the machine
	// was booted on it (a script issued or a session open) and moves on
	// at its next boot.
	Persistent bool
}

// Users returns the machines of this server reading content sha, ordered
// by MAC, for listings of what boots an image version.
func (m *Manager) Users(sha string) []Use {
	seen := map[string]Use{}
	m.mu.Lock()
	for mac, b := range m.boot {
		if b.sha == sha {
			seen[mac] = Use{MAC: mac}
		}
	}
	for mac, a := range m.att {
		if a.sha == sha {
			seen[mac] = Use{MAC: mac}
		}
	}
	m.mu.Unlock()
	bases, _ := filepath.Glob(filepath.Join(m.cfg.Data, "overlays", "*", baseFile))
	for _, p := range bases {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == sha {
			mac := strings.ReplaceAll(filepath.Base(filepath.Dir(p)), "-", ":")
			seen[mac] = Use{MAC: mac, Persistent: true}
		}
	}
	out := make([]Use, 0, len(seen))
	for _, u := range seen {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Use) int { return strings.Compare(a.MAC, b.MAC) })
	return out
}

// PersistentBase is the content mac's persistent overlay was made on, or
// "" when it has none.
func (m *Manager) PersistentBase(mac net.HardwareAddr) string {
	b, err := os.ReadFile(filepath.Join(m.OverlayDir(mac), baseFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ContentOf is the image content the export named name reads: the
// content a base export names, or the one the machine's open disk is on.
// "" when name is neither, or the machine has no disk open.
func (m *Manager) ContentOf(name string) string {
	if _, sha, _, err := ParseBaseExportName(name); err == nil {
		return sha
	}
	mac, _, err := ParseExportName(name)
	if err != nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.att[mac.String()]; a != nil {
		return a.sha
	}
	return ""
}
