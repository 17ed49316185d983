package rootdisk

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ErrNotAuthentic means a name presented as a machine's credential is not
// one: not the export of its latest boot, or not from its address.
var ErrNotAuthentic = errors.New("rootdisk: not the machine's root export")

// Authenticate says which machine presents export name from remote, for
// services that trust what holds a machine's root disk (the agent's
// identity fetch). The name must be one Lookup would open now: the
// per-boot export of the machine's latest script, or a base export name
// the fleet's key made, and it must come from the machine's DHCP lease
// where the lease is known. So a machine can speak for itself and for no
// other: it never learns another machine's secret, and a base export
// name is bound to its MAC by the tag and to its address by the lease.
func (m *Manager) Authenticate(name string, remote net.Addr) (net.HardwareAddr, error) {
	refuse := func(mac net.HardwareAddr, reason string) (net.HardwareAddr, error) {
		if mac != nil {
			return nil, fmt.Errorf("%w: machine %s: %s", ErrNotAuthentic, mac, reason)
		}
		return nil, fmt.Errorf("%w: %s", ErrNotAuthentic, reason)
	}
	var mac net.HardwareAddr
	if strings.HasPrefix(name, basePrefix) {
		bmac, sha, tag, err := ParseBaseExportName(name)
		if err != nil {
			return refuse(nil, err.Error())
		}
		if len(m.cfg.BaseKey) < 16 || subtle.ConstantTimeCompare([]byte(tag), []byte(baseTag(m.cfg.BaseKey, bmac, sha))) != 1 {
			return refuse(bmac, "wrong tag: not a base export name this fleet issued")
		}
		mac = bmac
	} else {
		emac, secret, err := ParseExportName(name)
		if err != nil {
			return refuse(nil, err.Error())
		}
		m.mu.Lock()
		b := m.boot[emac.String()]
		m.mu.Unlock()
		if b == nil {
			return refuse(emac, "no boot issued for this machine on this server (or it was reset)")
		}
		if subtle.ConstantTimeCompare([]byte(secret), []byte(b.secret)) != 1 {
			return refuse(emac, "wrong secret: not the export of this machine's latest boot script")
		}
		mac = emac
	}
	if reason := m.leaseMismatch(mac, remote); reason != "" {
		return refuse(mac, reason)
	}
	return mac, nil
}
