package rootarg

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// MulticastKey is the kernel command line parameter that tells the agent
// where its root's base content is multicast.
const MulticastKey = "bootfleet.mcast"

// ReadOrderKey names the URL where the agent reads the order in which
// earlier boots read the content (the server's /nbd/read-order/SHA256),
// which its read-ahead follows; ReadAheadKey how many chunks of that
// order past a miss it asks for (0: none).
const (
	ReadOrderKey = "bootfleet.mcast.order"
	ReadAheadKey = "bootfleet.mcast.ahead"
)

// Multicast is the value of bootfleet.mcast=GROUP:PORT,SERVER:PORT,CONTENT:
// the content's group, the server's request socket, and the content's id
// (chunkwire.ContentID, 16 hex digits). The agent joins GROUP, sends its
// requests to SERVER and reads the base's chunks of CONTENT from the group.
type Multicast struct {
	Group   netip.AddrPort
	Server  netip.AddrPort
	Content chunkwire.ContentID
}

// Arg is the parameter's value, as MulticastFromCmdline reads it.
func (m Multicast) Arg() string {
	return m.Group.String() + "," + m.Server.String() + "," + m.Content.String()
}

// MulticastFromCmdline parses the last bootfleet.mcast= of a kernel
// command line; ok is false when there is none, or it is "off".
func MulticastFromCmdline(cmdline string) (m Multicast, ok bool, err error) {
	var v string
	for _, w := range strings.Fields(cmdline) {
		if k, val, _ := strings.Cut(w, "="); k == MulticastKey {
			v = val
		}
	}
	if v == "" || v == "off" {
		return Multicast{}, false, nil
	}
	m, err = ParseMulticast(v)
	return m, err == nil, err
}

// ParseMulticast parses GROUP:PORT,SERVER:PORT,CONTENT. GROUP must be an
// IPv4 multicast address and SERVER an IPv4 unicast one: the multicast
// root is IPv4 only.
func ParseMulticast(s string) (Multicast, error) {
	bad := func(why string, args ...any) (Multicast, error) {
		return Multicast{}, fmt.Errorf("%s=%q: %s; want GROUP:PORT,SERVER:PORT,CONTENT, e.g. 239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef (the server writes it; check multicast: in its config)",
			MulticastKey, s, fmt.Sprintf(why, args...))
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return bad("%d comma-separated fields, want 3", len(parts))
	}
	var m Multicast
	var err error
	if m.Group, err = netip.ParseAddrPort(parts[0]); err != nil || !m.Group.Addr().Is4() || !m.Group.Addr().IsMulticast() || m.Group.Port() == 0 {
		return bad("group %q is not an IPv4 multicast address and port", parts[0])
	}
	if m.Server, err = netip.ParseAddrPort(parts[1]); err != nil || !m.Server.Addr().Is4() || m.Server.Addr().IsMulticast() ||
		m.Server.Addr().IsUnspecified() || m.Server.Port() == 0 {
		return bad("server %q is not an IPv4 unicast address and port", parts[1])
	}
	if len(parts[2]) != 2*len(m.Content) || strings.ToLower(parts[2]) != parts[2] {
		return bad("content %q is not %d lower-case hex digits", parts[2], 2*len(m.Content))
	}
	if _, err := hex.Decode(m.Content[:], []byte(parts[2])); err != nil {
		return bad("content %q is not hex", parts[2])
	}
	return m, nil
}
