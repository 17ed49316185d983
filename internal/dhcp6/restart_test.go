package dhcp6_test

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

func openStore(t *testing.T, path string) inventory.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newServer is a server of fd00:213::100-102 that keeps its leases in st.
func newServer(t *testing.T, st inventory.Store) *dhcp6.Server {
	t.Helper()
	s, err := dhcp6.New(dhcp6.Config{Interface: "br0", ServerIP: net.ParseIP("fd00:213::1"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		RangeStart: netip.MustParseAddr("fd00:213::100"), RangeEnd: netip.MustParseAddr("fd00:213::102"),
		Leases: inventorysvc.NewLeases6(st)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lease runs Solicit and Request for the client with DUID-UUID id (EDK
// II's kind: no MAC in it) and returns the address the Reply grants, or
// "" when no Reply came.
func lease(t *testing.T, s *dhcp6.Server, id byte, now time.Time) (advertised, granted string) {
	t.Helper()
	cid := &dhcpv6.DUIDUUID{UUID: [16]byte{15: id}}
	send := func(typ dhcpv6.MessageType, mods ...dhcpv6.Modifier) *dhcpv6.Message {
		m := &dhcpv6.Message{MessageType: typ, TransactionID: dhcpv6.TransactionID{id}}
		m.AddOption(dhcpv6.OptClientID(cid))
		m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, id}})
		for _, mod := range mods {
			mod(m)
		}
		out, _ := s.Process(m.ToBytes(), net.ParseIP("fe80::1234"), now)
		return out
	}
	addr := func(m *dhcpv6.Message) string {
		if m == nil || m.Options.OneIANA() == nil || m.Options.OneIANA().Options.OneAddress() == nil {
			return ""
		}
		return m.Options.OneIANA().Options.OneAddress().IPv6Addr.String()
	}
	adv := send(dhcpv6.MessageTypeSolicit)
	if adv == nil {
		t.Fatalf("client %d: no Advertise", id)
	}
	rep := send(dhcpv6.MessageTypeRequest, dhcpv6.WithServerID(adv.Options.ServerID()))
	return addr(adv), addr(rep)
}

// stored is the store's DHCPv6 leases as address to DUID, failing on an
// address stored twice.
func stored(t *testing.T, st inventory.Store) map[string]byte {
	t.Helper()
	ls, err := st.ListLeases6(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]byte{}
	for _, l := range ls {
		if _, dup := m[l.IP.String()]; dup {
			t.Fatalf("address %s is stored twice: %+v", l.IP, ls)
		}
		m[l.IP.String()] = l.DUID[len(l.DUID)-1]
	}
	return m
}

// TestRestartKeepsLeases: a restarted server offers a returning client its
// old address, never gives a stored address to another client, and the
// store never holds one address twice, also when an expired lease is
// handed on.
func TestRestartKeepsLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inventory.db")
	st := openStore(t, path)
	s := newServer(t, st)
	for i, want := range []string{"fd00:213::100", "fd00:213::101"} {
		if _, got := lease(t, s, byte(i+1), t0); got != want {
			t.Fatalf("client %d was granted %q, want %s", i+1, got, want)
		}
	}

	// Restart: a new server on the reopened database.
	st.Close()
	st = openStore(t, path)
	s = newServer(t, st)
	later := t0.Add(10 * time.Minute)
	if adv, got := lease(t, s, 3, later); adv != "fd00:213::102" || got != "fd00:213::102" {
		t.Fatalf("new client 3 after a restart: advertised %q, granted %q; want the free fd00:213::102, not a stored one", adv, got)
	}
	if adv, got := lease(t, s, 1, later); adv != "fd00:213::100" || got != "fd00:213::100" {
		t.Fatalf("returning client 1 after a restart: advertised %q, granted %q; want its old fd00:213::100", adv, got)
	}
	if adv, _ := lease(t, s, 4, later); adv != "" {
		t.Fatalf("client 4 in a range full of running leases was offered %s, want none", adv)
	}

	// Hours later every lease has expired: a new client takes the longest
	// expired one (client 2's), whose stored lease goes first.
	if _, got := lease(t, s, 5, t0.Add(3*time.Hour)); got != "fd00:213::101" {
		t.Fatalf("client 5 after every lease expired was granted %q, want client 2's expired fd00:213::101", got)
	}
	want := map[string]byte{"fd00:213::100": 1, "fd00:213::101": 5, "fd00:213::102": 3}
	if got := stored(t, st); len(got) != 3 || got["fd00:213::100"] != 1 || got["fd00:213::101"] != 5 || got["fd00:213::102"] != 3 {
		t.Fatalf("stored leases %v, want %v", got, want)
	}

	// A store that fails gets no Reply out: no client holds a lease a
	// restart would forget.
	st.Close()
	if _, got := lease(t, s, 6, t0.Add(5*time.Hour)); got != "" {
		t.Fatalf("with the store closed client 6 was granted %s, want no Reply", got)
	}
}

// TestRestartIgnoresLeasesOutsideRange: a lease stored under an older,
// wider range is not handed out again once the range no longer has it.
func TestRestartIgnoresLeasesOutsideRange(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "inventory.db"))
	err := st.PutLease6(context.Background(), inventory.Lease6{DUID: []byte{0, 4, 9}, IP: net.ParseIP("fd00:213::1ff"), Expiry: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, st)
	if _, got := lease(t, s, 1, t0); got != "fd00:213::100" {
		t.Fatalf("granted %q, want fd00:213::100", got)
	}
}
