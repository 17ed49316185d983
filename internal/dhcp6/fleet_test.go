package dhcp6_test

import (
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/dhcplb"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
)

// fixedPeers is a fleet that does not change during the test.
type fixedPeers struct{ a *dhcplb.Assignment }

func (p fixedPeers) Assignment() *dhcplb.Assignment { return p.a }

// fleetServer is server name of a fleet of names, on one lease store.
func fleetServer(t *testing.T, st inventory.Store, name string, names []string, mac byte) *dhcp6.Server {
	t.Helper()
	var others []dhcplb.Member
	for _, n := range names {
		others = append(others, dhcplb.Member{Name: n, Live: true})
	}
	cfg := dhcp6.Config{Interface: "br0", ServerIP: net.ParseIP("fd00:213::1"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, mac},
		RangeStart: netip.MustParseAddr("fd00:213::100"), RangeEnd: netip.MustParseAddr("fd00:213::1ff"),
		Leases: inventorysvc.NewLeases6(st)}
	if names != nil {
		cfg.Peers = fixedPeers{dhcplb.Assign(name, others, 0)}
	}
	s, err := dhcp6.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exchange sends m to every server, as a multicast reaches them all, and
// returns the servers that answered with their answers.
func exchange(servers []*dhcp6.Server, m *dhcpv6.Message) map[int]*dhcpv6.Message {
	out := map[int]*dhcpv6.Message{}
	for i, s := range servers {
		if r, _ := s.Process(m.ToBytes(), net.ParseIP("fe80::1234"), t0); r != nil {
			out[i] = r
		}
	}
	return out
}

func clientMsg(typ dhcpv6.MessageType, id int, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: typ, TransactionID: dhcpv6.TransactionID{byte(id)}}
	m.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDUUID{UUID: [16]byte{14: byte(id >> 8), 15: byte(id)}}))
	m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 1}})
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func grantedAddr(m *dhcpv6.Message) string {
	if m == nil || m.Options.OneIANA() == nil || m.Options.OneIANA().Options.OneAddress() == nil {
		return ""
	}
	return m.Options.OneIANA().Options.OneAddress().IPv6Addr.String()
}

// TestFleetDHCPv6: three servers on one lease store answer 60 clients.
// Each Solicit is answered by exactly one server (RFC 3074 buckets over
// the DUID), each server answers some, each Request only by the server it
// names, and no address is granted twice, in the replies or in the store.
// Then a fourth server that knows none of the leases (a stale view of the
// store) leases to a new client: its first pick is taken, the store
// refuses it, no Reply goes out, and the client's retry gets a free one.
func TestFleetDHCPv6(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "inv.db"))
	names := []string{"boot-a", "boot-b", "boot-c"}
	var servers []*dhcp6.Server
	for i, n := range names {
		servers = append(servers, fleetServer(t, st, n, names, byte(i+1)))
	}
	// Made now, it reads the store while it is empty: its view of it is
	// stale by the time it serves.
	late := fleetServer(t, st, "boot-d", nil, 4)
	perServer := map[int]int{}
	granted := map[string]int{}
	for id := 1; id <= 60; id++ {
		adv := exchange(servers, clientMsg(dhcpv6.MessageTypeSolicit, id))
		if len(adv) != 1 {
			t.Fatalf("client %d: %d servers advertised, want exactly one", id, len(adv))
		}
		var who int
		var a *dhcpv6.Message
		for i, m := range adv {
			who, a = i, m
		}
		perServer[who]++
		rep := exchange(servers, clientMsg(dhcpv6.MessageTypeRequest, id, dhcpv6.WithServerID(a.Options.ServerID())))
		if len(rep) != 1 || rep[who] == nil {
			t.Fatalf("client %d: Request to %s answered by %d servers, want only it", id, names[who], len(rep))
		}
		addr := grantedAddr(rep[who])
		if addr == "" {
			t.Fatalf("client %d: no address granted", id)
		}
		if prev, dup := granted[addr]; dup {
			t.Fatalf("%s granted to clients %d and %d", addr, prev, id)
		}
		granted[addr] = id
	}
	for i, n := range names {
		if perServer[i] == 0 {
			t.Errorf("server %s answered no client of 60: %v", n, perServer)
		}
	}
	t.Logf("clients per server: %v", perServer)

	first := exchange([]*dhcp6.Server{late}, clientMsg(dhcpv6.MessageTypeSolicit, 100))[0]
	req := clientMsg(dhcpv6.MessageTypeRequest, 100, dhcpv6.WithServerID(first.Options.ServerID()))
	if rep := exchange([]*dhcp6.Server{late}, req); len(rep) != 0 {
		if _, dup := granted[grantedAddr(rep[0])]; dup {
			t.Fatalf("the late server granted %s, which another server leased", grantedAddr(rep[0]))
		}
		t.Fatalf("the late server's first pick %s was free; want it taken (the range's first address)", grantedAddr(first))
	}
	var got string
	for try := 0; try < 3 && got == ""; try++ {
		got = grantedAddr(exchange([]*dhcp6.Server{late}, req)[0])
	}
	if _, dup := granted[got]; got == "" || dup {
		t.Fatalf("the late server's retry granted %q; want a free address", got)
	}
	seen := stored(t, st)
	if len(seen) != 61 {
		t.Errorf("the store holds %d leases, want 61 on distinct addresses: %v", len(seen), seen)
	}
}
