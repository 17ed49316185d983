package agent

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// NetPlan is which address families the agent configures before it dials
// its root: DHCPv4 (udhcpc) for IPv4 servers and host names (only a DHCPv4
// lease gives the initramfs a name server), and a global IPv6 address for
// IPv6 servers. The kernel configures IPv6 itself, by SLAAC from the
// router advertisement (bootfleet's own when it serves DHCPv6 in full
// mode), so the agent only waits for the address.
type NetPlan struct {
	DHCPv4 bool // run udhcpc; a failure is fatal unless IPv6 is also planned
	IPv6   bool // wait for a global IPv6 address
}

// PlanNetwork is the NetPlan for t. A list that mixes families plans both,
// so the agent can fail over to any of its servers; an IPv6-only list
// never waits for a DHCPv4 server that an IPv6-only network does not have.
func PlanNetwork(t rootarg.Target) NetPlan {
	var p NetPlan
	for _, s := range t.Servers() {
		if s.IPv6() {
			p.IPv6 = true
		} else {
			p.DHCPv4 = true
		}
	}
	return p
}

// Flags of an address in /proc/net/if_inet6 (linux/if_addr.h): an address
// with either of these cannot yet, or ever, be a source address.
const (
	ifaFlagDADFailed = 0x08
	ifaFlagTentative = 0x40
)

// UsableIPv6 reads /proc/net/if_inet6, whose lines are
//
//	ADDRESS(32 hex) IFINDEX PREFIXLEN SCOPE FLAGS NAME
//
// all numbers in hex, and returns the global addresses of nic that
// duplicate address detection has passed, with their prefix lengths.
func UsableIPv6(text, nic string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 6 || len(f[0]) != 32 {
			return nil, fmt.Errorf("if_inet6 line %d %q: want ADDRESS(32 hex) IFINDEX PREFIXLEN SCOPE FLAGS NAME", n, sc.Text())
		}
		raw, err := hex.DecodeString(f[0])
		if err != nil {
			return nil, fmt.Errorf("if_inet6 line %d: address %q is not hex: %w", n, f[0], err)
		}
		plen, err1 := strconv.ParseUint(f[2], 16, 8)
		scope, err2 := strconv.ParseUint(f[3], 16, 32)
		flags, err3 := strconv.ParseUint(f[4], 16, 32)
		if err1 != nil || err2 != nil || err3 != nil || plen > 128 {
			return nil, fmt.Errorf("if_inet6 line %d %q: prefix length, scope and flags must be hex numbers, the length at most 0x80", n, sc.Text())
		}
		if f[5] != nic || scope != 0 || flags&(ifaFlagTentative|ifaFlagDADFailed) != 0 {
			continue
		}
		a := netip.AddrFrom16([16]byte(raw))
		if !a.IsGlobalUnicast() {
			continue
		}
		out = append(out, netip.PrefixFrom(a, int(plen)))
	}
	return out, sc.Err()
}
