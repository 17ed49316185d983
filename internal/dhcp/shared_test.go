package dhcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcplb"
)

// sharedStore is a LeaseStore several test servers share, checking what
// LeaseStore.Put asks of a shared store, as the inventory does.
type sharedStore struct {
	mu     sync.Mutex
	leases map[string]Lease // by MAC
	puts   int
}

func newSharedStore() *sharedStore { return &sharedStore{leases: map[string]Lease{}} }

func (s *sharedStore) Load(context.Context) ([]Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lease
	for _, l := range s.leases {
		out = append(out, l)
	}
	return out, nil
}

func (s *sharedStore) Put(_ context.Context, l Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	for m, h := range s.leases {
		if m == l.MAC.String() || !h.IP.Equal(l.IP) {
			continue
		}
		if r := l.Replaces; r == nil || !bytes.Equal(r.MAC, h.MAC) || h.Expiry.After(r.Expiry) {
			return &TakenError{Holder: h}
		}
		delete(s.leases, m)
	}
	l.Replaces = nil
	s.leases[l.MAC.String()] = l
	return nil
}

func (s *sharedStore) Delete(_ context.Context, mac net.HardwareAddr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, mac.String())
	return nil
}

// fixedPeers is a Peers that never changes.
type fixedPeers struct{ f *dhcplb.Assignment }

func (p fixedPeers) Assignment() *dhcplb.Assignment { return p.f }

// fleetOfServers starts one test server per name, each with its own
// address (10.0.0.1, .2, ...), sharing store and a range of 100, each
// seeing the others as live.
func fleetOfServers(t *testing.T, store LeaseStore, logs *strings.Builder, names ...string) []*testServer {
	t.Helper()
	var out []*testServer
	for i, name := range names {
		var others []dhcplb.Member
		for _, o := range names {
			if o != name {
				others = append(others, dhcplb.Member{Name: o, Live: true})
			}
		}
		f := dhcplb.Assign(name, others, 3)
		ts := newTestServer(t, ModeFull, func(c *Config) {
			c.ServerIP = net.IPv4(10, 0, 0, byte(1+i)).To4()
			c.RangeEnd = net.IPv4(10, 0, 0, 199)
			c.LeaseStore = store
			c.Peers = fixedPeers{f}
			if logs != nil {
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
		})
		i, n := f.Slot()
		ts.alloc.setShared(true, i, n)
		out = append(out, ts)
	}
	return out
}

// TestFleetEveryClientOnce: a burst of clients against three servers
// sharing one store: each DISCOVER gets one offer, from the server its
// bucket names, each REQUEST one ACK, and no address goes twice.
func TestFleetEveryClientOnce(t *testing.T) {
	store := newSharedStore()
	servers := fleetOfServers(t, store, nil, "boot-a", "boot-b", "boot-c")
	observed := make([]*staticObserver, len(servers))
	for i, ts := range servers {
		observed[i] = &staticObserver{}
		ts.cfg.Observer = observed[i]
	}
	answered := map[int]int{}
	for c := range 60 {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x20, 0, byte(c)}
		var offers []reply
		var from []int
		for i, ts := range servers {
			if r, _ := ts.send(t, discover(t, mac, fwOVMF), false); r.msg != nil {
				offers, from = append(offers, r), append(from, i)
			}
		}
		if len(offers) != 1 {
			t.Fatalf("client %v got %d offers, want exactly 1", mac, len(offers))
		}
		answered[from[0]]++
		// Only the server that answers records the client's packets
		// (its DISCOVER, then its REQUEST): the others would count the
		// boot and the machine again.
		checkObserved := func(what string) {
			for i, o := range observed {
				if want := map[bool]int{true: 1}[i == from[0]]; o.n != want {
					t.Fatalf("client %v %s: server %d observed %d packets, want %d", mac, what, i, o.n, want)
				}
				o.n = 0
			}
		}
		checkObserved("DISCOVER")
		sid := servers[from[0]].cfg.ServerIP
		acks := 0
		for _, ts := range servers {
			r, _ := ts.send(t, msg(t, dhcpv4.MessageTypeRequest, mac, fwOVMF, requested(offers[0].msg.YourIPAddr), serverID(sid)), false)
			if r.msg != nil && r.msg.MessageType() == dhcpv4.MessageTypeAck {
				acks++
			} else if r.msg != nil {
				t.Fatalf("client %v: %v from %v, want one ACK", mac, r.msg.MessageType(), r.msg.ServerIdentifier())
			}
		}
		if acks != 1 {
			t.Fatalf("client %v got %d ACKs, want 1", mac, acks)
		}
		checkObserved("REQUEST")
	}
	if len(answered) != 3 {
		t.Fatalf("clients answered by server: %v, want all three to take a share", answered)
	}
	seen := map[string]string{}
	leases, _ := store.Load(context.Background())
	for _, l := range leases {
		if other, dup := seen[l.IP.String()]; dup {
			t.Fatalf("address %v leased to %s and %v", l.IP, other, l.MAC)
		}
		seen[l.IP.String()] = l.MAC.String()
	}
	if len(seen) != 60 {
		t.Fatalf("%d leases in the store, want 60", len(seen))
	}
}

// TestFleetCommitConflict: a server whose picture lacks another server's
// lease offers the address, is refused by the store, NAKs rather than
// ACKs, learns the holder, and offers another address next.
func TestFleetCommitConflict(t *testing.T) {
	store := newSharedStore()
	ctx := context.Background()
	a := newAllocator(&Config{RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.199"), ServerIP: ip4("10.0.0.1"),
		Netmask: net.CIDRMask(24, 32), LeaseTime: time.Hour, Machines: StaticMachines{}}, store)
	b := newAllocator(&Config{RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.199"), ServerIP: ip4("10.0.0.2"),
		Netmask: net.CIDRMask(24, 32), LeaseTime: time.Hour, Machines: StaticMachines{}}, store)
	a.setShared(true, 0, 1)
	b.setShared(true, 0, 1) // same slot: both start at the same address
	ipA, err := a.offer(macA, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.commit(ctx, macA, ipA, t0); err != nil {
		t.Fatal(err)
	}
	ipB, err := b.offer(macB, nil, t0)
	if err != nil || !ipB.Equal(ipA) {
		t.Fatalf("b offered %v, %v; the test wants b unaware of a's lease on %v", ipB, err, ipA)
	}
	_, err = b.commit(ctx, macB, ipB, t0)
	if !errors.Is(err, errUnavailable) {
		t.Fatalf("b's commit of a taken address: %v, want errUnavailable (a NAK)", err)
	}
	if l, ok := b.leaseOf(macA, t0); !ok || !l.IP.Equal(ipA) {
		t.Fatalf("b did not learn a's lease from the refusal: %+v %v", l, ok)
	}
	select {
	case <-b.kick:
	default:
		t.Fatal("a refused commit must ask for a reread")
	}
	if ip, err := b.offer(macB, nil, t0); err != nil || ip.Equal(ipA) {
		t.Fatalf("b's next offer %v, %v; want another address than %v", ip, err, ipA)
	}
	// a leases more; b's reread learns them all.
	for i := range 5 {
		m := net.HardwareAddr{0x52, 0x54, 0x00, 0x30, 0, byte(i)}
		ip, _ := a.offer(m, nil, t0)
		if _, err := a.commit(ctx, m, ip, t0); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.refresh(ctx); err != nil || n < 5 {
		t.Fatalf("b.refresh = %d, %v; want the 5 new leases", n, err)
	}
	for i := range 5 {
		m := net.HardwareAddr{0x52, 0x54, 0x00, 0x30, 0, byte(i)}
		if _, ok := b.leaseOf(m, t0); !ok {
			t.Fatalf("after the reread b does not know %v's lease", m)
		}
	}
}

// TestFleetTakeoverOfRenewed: a server that saw a lease expired must not
// take the address over once another server has renewed it.
func TestFleetTakeoverOfRenewed(t *testing.T) {
	store := newSharedStore()
	ctx := context.Background()
	cfg := func(server string) *Config {
		return &Config{RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.100"), ServerIP: ip4(server),
			Netmask: net.CIDRMask(24, 32), LeaseTime: time.Hour, Machines: StaticMachines{}}
	}
	a, b := newAllocator(cfg("10.0.0.1"), store), newAllocator(cfg("10.0.0.2"), store)
	a.setShared(true, 0, 2)
	b.setShared(true, 1, 2)
	x := ip4("10.0.0.100")
	if _, err := a.commit(ctx, macA, x, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Hour) // macA's lease has expired by then, as b sees it
	if _, err := a.commit(ctx, macA, x, later); err != nil {
		t.Fatalf("a renews macA: %v", err)
	}
	if _, err := b.commit(ctx, macB, x, later); !errors.Is(err, errUnavailable) {
		t.Fatalf("b taking over the renewed lease: %v, want errUnavailable", err)
	}
	leases, _ := store.Load(ctx)
	if len(leases) != 1 || !bytes.Equal(leases[0].MAC, macA) {
		t.Fatalf("store holds %+v, want macA's renewed lease only", leases)
	}
}

func TestBalanced(t *testing.T) {
	tests := []struct {
		name    string
		typ     dhcpv4.MessageType
		mods    []dhcpv4.Modifier
		unicast bool
		bs      bool
		want    bool
	}{
		{"DISCOVER", dhcpv4.MessageTypeDiscover, nil, false, false, true},
		{"REQUEST SELECTING", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{serverID(serverIP)}, false, false, false},
		{"REQUEST INIT-REBOOT", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{requested(ip4("10.0.0.100"))}, false, false, true},
		{"REQUEST REBINDING", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{dhcpv4.WithClientIP(ip4("10.0.0.100"))}, false, false, true},
		{"REQUEST RENEWING", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{dhcpv4.WithClientIP(ip4("10.0.0.100"))}, true, false, false},
		{"INFORM broadcast", dhcpv4.MessageTypeInform, nil, false, false, true},
		{"INFORM to us", dhcpv4.MessageTypeInform, nil, true, false, false},
		{"RELEASE", dhcpv4.MessageTypeRelease, []dhcpv4.Modifier{serverID(serverIP)}, true, false, false},
		{"DECLINE", dhcpv4.MessageTypeDecline, []dhcpv4.Modifier{serverID(serverIP)}, false, false, false},
		{"boot server port", dhcpv4.MessageTypeRequest, nil, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msg(t, tt.typ, macA, fwOVMF, tt.mods...)
			if got := balanced(request{msg: m, typ: tt.typ, unicast: tt.unicast, bsPort: tt.bs}); got != tt.want {
				t.Fatalf("balanced = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFleetRenewAndCover: a RENEW sent to a server is answered by it
// whatever the bucket, the same REQUEST broadcast (REBINDING) only by the
// bucket's server; a stale server's clients are answered, with an Info
// line that says so.
func TestFleetRenewAndCover(t *testing.T) {
	var logs strings.Builder
	store := newSharedStore()
	servers := fleetOfServers(t, store, &logs, "boot-a", "boot-b")
	// A client of boot-b's bucket.
	var mac net.HardwareAddr
	for c := range 256 {
		m := net.HardwareAddr{0x52, 0x54, 0x00, 0x40, 0, byte(c)}
		if d := servers[1].cfg.Peers.Assignment().Decide(m, 0); d.Reason == dhcplb.Own {
			mac = m
			break
		}
	}
	b := servers[1]
	off, why := b.send(t, discover(t, mac, fwLinux), false)
	if off.msg == nil {
		t.Fatalf("boot-b: no offer to its own client: %s", why)
	}
	ip := off.msg.YourIPAddr
	if r, why := b.send(t, msg(t, dhcpv4.MessageTypeRequest, mac, fwLinux, requested(ip), serverID(b.cfg.ServerIP)), false); r.msg == nil {
		t.Fatalf("boot-b: no ACK: %s", why)
	}
	renew := msg(t, dhcpv4.MessageTypeRequest, mac, fwLinux, dhcpv4.WithClientIP(ip))
	a := servers[0]
	if r, why := a.processTo(context.Background(), renew.ToBytes(), &net.UDPAddr{IP: ip, Port: 68}, a.cfg.ServerIP, false); r.msg == nil || r.msg.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("RENEW sent to boot-a: %v %s, want an ACK", r.msg, why)
	}
	if r, why := a.processTo(context.Background(), renew.ToBytes(), &net.UDPAddr{IP: ip, Port: 68}, net.IPv4bcast, false); r.msg != nil || !strings.Contains(why, "boot-b") {
		t.Fatalf("REBIND broadcast, boot-b's client, at boot-a: %v %q, want silence naming boot-b", r.msg, why)
	}
	// boot-b goes stale: boot-a covers its clients and says so.
	a.cfg.Peers = fixedPeers{dhcplb.Assign("boot-a", []dhcplb.Member{{Name: "boot-b"}}, 3)}
	other := net.HardwareAddr{0x52, 0x54, 0x00, 0x40, 1, 1}
	for c := 0; servers[1].cfg.Peers.Assignment().Decide(other, 0).Reason != dhcplb.Own; c++ {
		other[5] = byte(c)
	}
	if r, why := a.send(t, discover(t, other, fwOVMF), false); r.msg == nil {
		t.Fatalf("boot-a with boot-b stale: no offer to boot-b's client: %s", why)
	}
	if !strings.Contains(logs.String(), "dhcp answering for a stale server") || !strings.Contains(logs.String(), "level=INFO") {
		t.Fatalf("covering not logged at Info:\n%s", logs.String())
	}
}

// TestSlotOrigin: each server of a fleet starts offering in its own part
// of the range and wraps around to the start when its part is gone.
func TestSlotOrigin(t *testing.T) {
	tests := []struct {
		i, n  int
		first string
		wrap  string // the offer after the last address of the range
	}{
		{0, 1, "10.0.0.100", ""},
		{1, 3, "10.0.0.103", "10.0.0.100"},
		{2, 3, "10.0.0.106", "10.0.0.100"},
		{5, 3, "10.0.0.100", ""}, // out of range: as alone
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d of %d", tt.i, tt.n), func(t *testing.T) {
			a := newAllocator(&Config{RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.109"), ServerIP: ip4("10.0.0.1"),
				Netmask: net.CIDRMask(24, 32), LeaseTime: time.Hour, Machines: StaticMachines{}}, NewMemStore())
			a.setShared(true, tt.i, tt.n)
			var got []string
			for c := range 10 {
				ip, err := a.offer(net.HardwareAddr{0x52, 0x54, 0, 0, 0, byte(c)}, nil, t0)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ip.String())
			}
			if got[0] != tt.first {
				t.Fatalf("offers %v, want the first %s", got, tt.first)
			}
			if last := 10 - int(ip2u(ip4(tt.first))-ip2u(ip4("10.0.0.100"))); tt.wrap != "" && got[last] != tt.wrap {
				t.Fatalf("offers %v, want %s after 10.0.0.109", got, tt.wrap)
			}
			if seen := map[string]bool{}; true {
				for _, g := range got {
					if seen[g] {
						t.Fatalf("offers %v hold %s twice", got, g)
					}
					seen[g] = true
				}
			}
		})
	}
}

// TestProxyFleetOneOffer: in proxy mode too, each boot client's DISCOVER
// gets one proxy offer from the servers of the LAN, and the boot server
// port answers whoever the client asks.
func TestProxyFleetOneOffer(t *testing.T) {
	var servers []*testServer
	for i, name := range []string{"boot-a", "boot-b"} {
		other := []dhcplb.Member{{Name: "boot-b", Live: true}}
		if i == 1 {
			other = []dhcplb.Member{{Name: "boot-a", Live: true}}
		}
		servers = append(servers, newTestServer(t, ModeProxy, func(c *Config) {
			c.ServerIP = net.IPv4(10, 0, 0, byte(1+i)).To4()
			c.Peers = fixedPeers{dhcplb.Assign(name, other, 3)}
		}))
	}
	for c := range 40 {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x50, 0, byte(c)}
		offers := 0
		for _, ts := range servers {
			if r, _ := ts.send(t, discover(t, mac, fwOVMF), false); r.msg != nil {
				offers++
			}
		}
		if offers != 1 {
			t.Fatalf("client %v got %d proxy offers, want 1", mac, offers)
		}
		for _, ts := range servers {
			m := msg(t, dhcpv4.MessageTypeRequest, mac, fwOVMF, dhcpv4.WithClientIP(ip4("10.0.0.77")))
			if r, why := ts.send(t, m, true); r.msg == nil {
				t.Fatalf("client %v on the boot server port of %v: no answer: %s", mac, ts.cfg.ServerIP, why)
			}
		}
	}
}
