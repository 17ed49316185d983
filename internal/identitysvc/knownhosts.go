package identitysvc

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// KnownHosts is a known_hosts file for the machines f selects (and, when
// machine is not nil, that machine only): one line per key, naming the
// machine by its name, its reserved address and the address of its
// latest boot. Machines with no keys yet, or with neither a name nor an
// address, are left out.
func (s *Service) KnownHosts(ctx context.Context, f inventory.MachineFilter, machine net.HardwareAddr) (string, error) {
	ms, err := s.cfg.Store.ListMachines(ctx, f)
	if err != nil {
		return "", err
	}
	keys, err := s.cfg.Store.ListHostKeys(ctx)
	if err != nil {
		return "", err
	}
	byMAC := map[string][]string{}
	for _, k := range keys {
		byMAC[k.MAC.String()] = k.Public
	}
	var b strings.Builder
	for _, m := range ms {
		if machine != nil && m.MAC.String() != machine.String() {
			continue
		}
		hosts := hostPatterns(m)
		pub := byMAC[m.MAC.String()]
		if hosts == "" || len(pub) == 0 {
			continue
		}
		for _, p := range pub {
			f := strings.Fields(p)
			if len(f) < 2 {
				continue
			}
			fmt.Fprintf(&b, "%s %s %s\n", hosts, f[0], f[1])
		}
	}
	return b.String(), nil
}

func hostPatterns(m inventory.Machine) string {
	var h []string
	if m.Name != "" {
		h = append(h, m.Name)
	}
	for _, ip := range []net.IP{m.IP, m.LastAddress} {
		if ip != nil && !slices.Contains(h, ip.String()) {
			h = append(h, ip.String())
		}
	}
	return strings.Join(h, ",")
}
