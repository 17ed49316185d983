package rootdisk

import (
	"os"
	"path/filepath"
	"strings"
)

// InUse reports whether a machine boots from content sha: a boot issued
// on it, a connected machine, or a persistent overlay made on it. When
// none does and drop is not nil, drop (which deletes the content) runs
// under the lock IssueBoot pins content under, so no boot is issued on
// content being deleted; a base image lingering open on sha is closed
// first, as its mapping would hold the deleted file's space. The error is
// drop's.
func (m *Manager) InUse(sha string, drop func() error) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inUse(sha) {
		return true, nil
	}
	if drop == nil {
		return false, nil
	}
	if err := m.dropIdle(sha); err != nil {
		m.log.Warn("closing an unused base image failed", "sha256", sha, "err", err)
	}
	return false, drop()
}

// inUse is InUse's answer. The caller holds m.mu.
func (m *Manager) inUse(sha string) bool {
	for _, b := range m.boot {
		if b.sha == sha {
			return true
		}
	}
	for _, a := range m.att {
		if a.sha == sha {
			return true
		}
	}
	if s := m.images[sha]; s != nil && s.refs > 0 { // machines reading it read-only
		return true
	}
	bases, _ := filepath.Glob(filepath.Join(m.cfg.Data, "overlays", "*", baseFile))
	edits, _ := filepath.Glob(filepath.Join(m.editRoot(), "*", baseFile))
	for _, p := range append(bases, edits...) {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == sha {
			return true
		}
	}
	return false
}

// revoke ends the NBD sessions of a: the server closes them, and the last
// one detaches. The caller holds m.mu.
func revoke(a *attachment) {
	select {
	case <-a.revoked:
	default:
		close(a.revoked)
	}
}
