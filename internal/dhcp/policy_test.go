package dhcp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// want describes the expected reply; typ None means "no reply".
type want struct {
	typ      dhcpv4.MessageType
	yiaddr   string // "" means 0.0.0.0
	dest     string
	bootFile string // option 67; "" means absent
	vendor   string // option 60; "" means absent
	pxeOpts  bool   // option 43 present
	lease    bool   // option 51 present
}

func check(t *testing.T, r reply, why string, w want) {
	t.Helper()
	if w.typ == dhcpv4.MessageTypeNone {
		if r.msg != nil {
			t.Fatalf("got %v reply, want none\n%s", r.msg.MessageType(), r.msg.Summary())
		}
		return
	}
	if r.msg == nil {
		t.Fatalf("no reply (%s), want %v", why, w.typ)
	}
	m := r.msg
	if m.MessageType() != w.typ {
		t.Fatalf("reply type %v, want %v\n%s", m.MessageType(), w.typ, m.Summary())
	}
	if w.yiaddr == "" {
		w.yiaddr = "0.0.0.0"
	}
	if got := m.YourIPAddr.String(); got != w.yiaddr {
		t.Errorf("yiaddr %s, want %s", got, w.yiaddr)
	}
	if got := r.dest.String(); got != w.dest {
		t.Errorf("destination %s, want %s", got, w.dest)
	}
	if got := string(m.Options.Get(dhcpv4.OptionBootfileName)); got != w.bootFile {
		t.Errorf("option 67 %q, want %q", got, w.bootFile)
	}
	if w.bootFile != "" {
		if !m.ServerIPAddr.Equal(serverIP) {
			t.Errorf("siaddr %v, want %v", m.ServerIPAddr, serverIP)
		}
		if m.BootFileName != w.bootFile {
			t.Errorf("file field %q, want %q", m.BootFileName, w.bootFile)
		}
		if got := string(m.Options.Get(dhcpv4.OptionTFTPServerName)); got != serverIP.String() {
			t.Errorf("option 66 %q, want %s", got, serverIP)
		}
	}
	if got := string(m.Options.Get(dhcpv4.OptionClassIdentifier)); got != w.vendor {
		t.Errorf("option 60 %q, want %q", got, w.vendor)
	}
	if got := m.Options.Has(dhcpv4.OptionVendorSpecificInformation); got != w.pxeOpts {
		t.Errorf("option 43 present %v, want %v", got, w.pxeOpts)
	}
	if got := m.Options.Has(dhcpv4.OptionIPAddressLeaseTime); got != w.lease {
		t.Errorf("option 51 present %v, want %v", got, w.lease)
	}
	if !bytes.Equal(m.ClientHWAddr, m.ClientHWAddr) || m.OpCode != dhcpv4.OpcodeBootReply {
		t.Errorf("reply header wrong: %v", m)
	}
	if sid := m.ServerIdentifier(); !sid.Equal(serverIP) {
		t.Errorf("server identifier %v, want %v", sid, serverIP)
	}
}

const bcast = "255.255.255.255:68"

func TestFullPolicy(t *testing.T) {
	reserveA := func(ip string, boot bool) func(*Config) {
		return func(c *Config) { c.Machines = StaticMachines{{MAC: macA, IP: ip4(ip), Boot: boot}} }
	}
	script := "http://10.0.0.1:8080/ipxe/52-54-00-00-00-0a"
	tests := []struct {
		name  string
		cfg   []func(*Config)
		setup func(t *testing.T, ts *testServer)
		req   func(t *testing.T) *dhcpv4.DHCPv4
		bs    bool
		want  want
	}{
		{name: "ovmf discover gets ipxe.efi",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "bios discover gets undionly.kpxe",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwBIOS) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: "undionly.kpxe", lease: true}},
		{name: "snponly configured",
			cfg:  []func(*Config){func(c *Config) { c.Plan.EFIx64File = "snponly.efi" }},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: "snponly.efi", lease: true}},
		{name: "ipxe gets its script, never ipxe.efi",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwIPXE) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: script, lease: true}},
		{name: "uefi http boot echoes HTTPClient",
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwHTTP) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast,
				bootFile: "http://10.0.0.1:8080/files/ipxe.efi", vendor: "HTTPClient", lease: true}},
		{name: "os client gets address only",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwLinux) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, lease: true}},
		{name: "machine not to boot gets address only",
			cfg:  []func(*Config){reserveA("10.0.0.50", false)},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.50", dest: bcast, lease: true}},
		{name: "unsupported arch gets address only",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return discover(t, macA, []dhcpv4.Modifier{vendorClass("PXEClient"), archOpt(10)})
			},
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, lease: true}},
		{name: "requested address preferred",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF, requested(ip4("10.0.0.102"))) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.102", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "requested address outside range ignored",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF, requested(ip4("10.0.0.7"))) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "reservation outside range",
			cfg:  []func(*Config){reserveA("10.0.0.50", true)},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.50", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "address reserved for another machine is skipped",
			cfg:  []func(*Config){reserveA("10.0.0.100", true)},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macB, fwOVMF, requested(ip4("10.0.0.100"))) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.101", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "request for address reserved for another machine is NAKed",
			cfg: []func(*Config){reserveA("10.0.0.100", true)},
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macB, fwOVMF, requested(ip4("10.0.0.100")), serverID(serverIP))
			},
			want: want{typ: dhcpv4.MessageTypeNak, dest: bcast}},
		{name: "selecting request acked",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.101")), serverID(serverIP))
			},
			want: want{typ: dhcpv4.MessageTypeAck, yiaddr: "10.0.0.101", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "request for another server is ignored",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.101")), serverID(ip4("10.0.0.2")))
			}},
		{name: "request for taken address is NAKed",
			setup: func(t *testing.T, ts *testServer) { ts.dora(t, macB, fwOVMF) },
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.100")))
			},
			want: want{typ: dhcpv4.MessageTypeNak, dest: bcast}},
		{name: "init-reboot on wrong subnet is NAKed",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux, requested(ip4("192.168.1.10")))
			},
			want: want{typ: dhcpv4.MessageTypeNak, dest: bcast}},
		{name: "renew is unicast to ciaddr",
			setup: func(t *testing.T, ts *testServer) { ts.dora(t, macA, fwLinux) },
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux, dhcpv4.WithClientIP(ip4("10.0.0.100")), dhcpv4.WithBroadcast(false))
			},
			want: want{typ: dhcpv4.MessageTypeAck, yiaddr: "10.0.0.100", dest: "10.0.0.100:68", lease: true}},
		{name: "renew with broadcast flag is broadcast",
			setup: func(t *testing.T, ts *testServer) { ts.dora(t, macA, fwLinux) },
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux, dhcpv4.WithClientIP(ip4("10.0.0.100")), dhcpv4.WithBroadcast(true))
			},
			want: want{typ: dhcpv4.MessageTypeAck, yiaddr: "10.0.0.100", dest: bcast, lease: true}},
		{name: "renew of someone else's address is NAKed",
			setup: func(t *testing.T, ts *testServer) { ts.dora(t, macB, fwLinux) },
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux, dhcpv4.WithClientIP(ip4("10.0.0.100")), dhcpv4.WithBroadcast(false))
			},
			want: want{typ: dhcpv4.MessageTypeNak, dest: bcast}},
		{name: "request without any address is dropped",
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux) }},
		{name: "pool exhausted",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux)
				ts.dora(t, macC, fwLinux)
				ts.dora(t, macD, fwLinux)
			},
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) }},
		{name: "pending offers count against the pool",
			setup: func(t *testing.T, ts *testServer) {
				for _, m := range []net.HardwareAddr{macB, macC, macD} {
					if r, _ := ts.send(t, discover(t, m, fwLinux), false); r.msg == nil {
						t.Fatal("no offer")
					}
				}
			},
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) }},
		{name: "expired lease reused, oldest first",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux) // .100
				ts.clock.t = ts.clock.t.Add(time.Minute)
				ts.dora(t, macC, fwLinux) // .101
				ts.dora(t, macD, fwLinux) // .102
				ts.clock.t = ts.clock.t.Add(2 * time.Hour)
			},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "returning machine gets its expired address back",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux)
				ts.dora(t, macA, fwLinux) // .101
				ts.clock.t = ts.clock.t.Add(2 * time.Hour)
			},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.101", dest: bcast, bootFile: "ipxe.efi", lease: true}},
		{name: "released address goes back to the same machine",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux)
				ip := ts.dora(t, macA, fwLinux)
				if r, _ := ts.send(t, msg(t, dhcpv4.MessageTypeRelease, macA, fwLinux, dhcpv4.WithClientIP(ip), serverID(serverIP)), false); r.msg != nil {
					t.Fatal("RELEASE answered")
				}
			},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwLinux) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.101", dest: bcast, lease: true}},
		{name: "released address can go to another machine",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux)
				ts.dora(t, macC, fwLinux)
				ip := ts.dora(t, macD, fwLinux)
				ts.send(t, msg(t, dhcpv4.MessageTypeRelease, macD, fwLinux, dhcpv4.WithClientIP(ip), serverID(serverIP)), false)
			},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwLinux) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.102", dest: bcast, lease: true}},
		{name: "declined address is not offered again",
			setup: func(t *testing.T, ts *testServer) {
				ts.dora(t, macB, fwLinux)
				ts.send(t, msg(t, dhcpv4.MessageTypeDecline, macB, fwLinux, requested(ip4("10.0.0.100")), serverID(serverIP)), false)
			},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwLinux) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.101", dest: bcast, lease: true}},
		{name: "inform acked to ciaddr without lease",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeInform, macA, fwLinux, dhcpv4.WithClientIP(ip4("10.0.0.9")), dhcpv4.WithBroadcast(false))
			},
			want: want{typ: dhcpv4.MessageTypeAck, dest: "10.0.0.9:68"}},
		{name: "relayed discover goes back to the relay",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return discover(t, macA, fwOVMF, dhcpv4.WithGatewayIP(ip4("10.0.0.250")), dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, []byte{1, 2, 'e', '0'})))
			},
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: "10.0.0.250:67", bootFile: "ipxe.efi", lease: true}},
		{name: "relayed NAK goes to the relay",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwLinux, requested(ip4("192.168.9.9")), dhcpv4.WithGatewayIP(ip4("10.0.0.250")))
			},
			want: want{typ: dhcpv4.MessageTypeNak, dest: "10.0.0.250:67"}},
		{name: "boot server port not served in full mode",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, dhcpv4.WithClientIP(ip4("10.0.0.100")))
			},
			bs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, ModeFull, tt.cfg...)
			if tt.setup != nil {
				tt.setup(t, ts)
			}
			r, why := ts.send(t, tt.req(t), tt.bs)
			check(t, r, why, tt.want)
			if r.msg != nil && tt.want.typ != dhcpv4.MessageTypeNak && tt.want.yiaddr != "" {
				if got := net.IP(r.msg.Options.Get(dhcpv4.OptionSubnetMask)).String(); got != "255.255.255.0" && len(r.msg.Options.Get(dhcpv4.OptionSubnetMask)) != 4 {
					t.Errorf("subnet mask option missing: %q", got)
				}
				if rt := r.msg.Router(); len(rt) != 1 || !rt[0].Equal(ip4("10.0.0.254")) {
					t.Errorf("router %v", rt)
				}
				if d := r.msg.DNS(); len(d) != 1 || !d[0].Equal(ip4("10.0.0.53")) {
					t.Errorf("dns %v", d)
				}
				if lt := r.msg.IPAddressLeaseTime(0); lt != time.Hour {
					t.Errorf("lease time %v", lt)
				}
			}
		})
	}
}

func TestRelayEchoesOption82(t *testing.T) {
	ts := newTestServer(t, ModeFull)
	r, _ := ts.send(t, discover(t, macA, fwOVMF, dhcpv4.WithGatewayIP(ip4("10.0.0.250")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, []byte{1, 2, 'e', '0'}))), false)
	if r.msg == nil {
		t.Fatal("no reply")
	}
	if !r.msg.GatewayIPAddr.Equal(ip4("10.0.0.250")) {
		t.Errorf("giaddr %v", r.msg.GatewayIPAddr)
	}
	if got := r.msg.Options.Get(dhcpv4.OptionRelayAgentInformation); !bytes.Equal(got, []byte{1, 2, 'e', '0'}) {
		t.Errorf("option 82 %x", got)
	}
}

func TestLeasePersistedBeforeAck(t *testing.T) {
	fs := &failingStore{LeaseStore: NewMemStore()}
	ts := newTestServer(t, ModeFull, func(c *Config) { c.LeaseStore = fs })
	fs.fail = true
	r, why := ts.send(t, msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.100")), serverID(serverIP)), false)
	if r.msg != nil {
		t.Fatalf("ACK sent although the lease was not saved: %v", r.msg)
	}
	if !strings.Contains(why, "disk full") {
		t.Errorf("reason %q", why)
	}
	fs.fail = false
	if ip := ts.dora(t, macA, fwOVMF); !ip.Equal(ip4("10.0.0.100")) {
		t.Errorf("after recovery got %v", ip)
	}
	ls, _ := fs.Load(context.Background())
	if len(ls) != 1 || !ls[0].IP.Equal(ip4("10.0.0.100")) || !bytes.Equal(ls[0].MAC, macA) {
		t.Errorf("stored leases %+v", ls)
	}
}

type failingStore struct {
	LeaseStore
	fail bool
}

func (f *failingStore) Put(ctx context.Context, l Lease) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.LeaseStore.Put(ctx, l)
}

func TestPersistAndReload(t *testing.T) {
	file := t.TempDir() + "/leases.json"
	withFile := func(c *Config) { c.LeaseStore = nil; c.LeaseFile = file }
	ts := newTestServer(t, ModeFull, withFile)
	a := ts.dora(t, macA, fwOVMF)
	b := ts.dora(t, macB, fwLinux)

	// A restart: a new server on the same file.
	ts2 := newTestServer(t, ModeFull, withFile)
	// macC asks for A's address: refused, and offered the only free one.
	if r, _ := ts2.send(t, msg(t, dhcpv4.MessageTypeRequest, macC, fwLinux, requested(a), serverID(serverIP)), false); r.msg == nil || r.msg.MessageType() != dhcpv4.MessageTypeNak {
		t.Fatalf("request for a persisted lease of another machine: %v", r.msg)
	}
	if got := ts2.dora(t, macC, fwLinux); got.Equal(a) || got.Equal(b) {
		t.Fatalf("after reload %v got an address already leased: %v", macC, got)
	}
	if got := ts2.dora(t, macA, fwOVMF); !got.Equal(a) {
		t.Errorf("after reload A got %v, want its lease %v", got, a)
	}
	if r, _ := ts2.send(t, discover(t, macD, fwLinux), false); r.msg != nil {
		t.Errorf("pool should be exhausted after reload, got offer %v", r.msg.YourIPAddr)
	}
}

func TestFileStoreErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":     "not json",
		"bad version": `{"version": 7, "leases": []}`,
		"bad mac":     `{"version": 1, "leases": [{"mac": "zz", "ip": "10.0.0.1"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := dir + "/" + strings.ReplaceAll(name, " ", "_")
			if err := writeFile(p, content); err != nil {
				t.Fatal(err)
			}
			_, err := New(Config{Mode: ModeFull, Interface: "x", ServerIP: serverIP, Netmask: net.CIDRMask(24, 32),
				RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.101"), LeaseFile: p})
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("New = %v, want an error naming %s", err, p)
			}
		})
	}
	// A data directory that does not exist: Put fails, no ACK.
	ts := newTestServer(t, ModeFull, func(c *Config) { c.LeaseStore = nil; c.LeaseFile = dir + "/missing/leases.json" })
	if r, _ := ts.send(t, msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.100")), serverID(serverIP)), false); r.msg != nil {
		t.Errorf("ACK without a writable lease file")
	}
}

func TestProxyPolicy(t *testing.T) {
	bs := func(m *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 { return m }
	script := "http://10.0.0.1:8080/ipxe/52-54-00-00-00-0a"
	tests := []struct {
		name string
		cfg  []func(*Config)
		req  func(t *testing.T) *dhcpv4.DHCPv4
		bs   bool
		want want
	}{
		{name: "ovmf discover gets proxy offer",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF, withUUID) },
			want: want{typ: dhcpv4.MessageTypeOffer, dest: bcast, bootFile: "ipxe.efi", vendor: "PXEClient", pxeOpts: true}},
		{name: "bios discover",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwBIOS) },
			want: want{typ: dhcpv4.MessageTypeOffer, dest: bcast, bootFile: "undionly.kpxe", vendor: "PXEClient", pxeOpts: true}},
		{name: "ipxe discover gets script",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwIPXE) },
			want: want{typ: dhcpv4.MessageTypeOffer, dest: bcast, bootFile: script, vendor: "PXEClient", pxeOpts: true}},
		{name: "http boot discover",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwHTTP) },
			want: want{typ: dhcpv4.MessageTypeOffer, dest: bcast, bootFile: "http://10.0.0.1:8080/files/ipxe.efi", vendor: "HTTPClient"}},
		{name: "os client ignored",
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwLinux) }},
		{name: "client without vendor class ignored",
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwNone) }},
		{name: "machine not to boot ignored",
			cfg: []func(*Config){func(c *Config) { c.Machines = StaticMachines{{MAC: macA, Boot: false}} }},
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) }},
		{name: "unsupported arch ignored",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return discover(t, macA, []dhcpv4.Modifier{vendorClass("PXEClient"), archOpt(10)})
			}},
		{name: "request on 67 left to the site server",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, requested(ip4("10.0.0.77")), serverID(ip4("10.0.0.2")))
			}},
		{name: "request on 4011 gets ack to the client",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return bs(msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF, dhcpv4.WithClientIP(ip4("10.0.0.77"))))
			},
			bs:   true,
			want: want{typ: dhcpv4.MessageTypeAck, dest: "10.0.0.77:68", bootFile: "ipxe.efi", vendor: "PXEClient", pxeOpts: true}},
		{name: "request on 4011 without ciaddr is broadcast",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeRequest, macA, fwOVMF) },
			bs:   true,
			want: want{typ: dhcpv4.MessageTypeAck, dest: bcast, bootFile: "ipxe.efi", vendor: "PXEClient", pxeOpts: true}},
		{name: "discover on 4011 ignored",
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwOVMF) },
			bs:  true},
		{name: "relayed proxy offer goes to relay",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return discover(t, macA, fwOVMF, dhcpv4.WithGatewayIP(ip4("10.9.0.1")))
			},
			want: want{typ: dhcpv4.MessageTypeOffer, dest: "10.9.0.1:67", bootFile: "ipxe.efi", vendor: "PXEClient", pxeOpts: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, ModeProxy, tt.cfg...)
			r, why := ts.send(t, tt.req(t), tt.bs)
			check(t, r, why, tt.want)
			if r.msg == nil {
				return
			}
			for _, o := range []dhcpv4.OptionCode{dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionIPAddressLeaseTime} {
				if r.msg.Options.Has(o) {
					t.Errorf("proxy reply carries address option %v", o)
				}
			}
			if tt.want.pxeOpts {
				if got := r.msg.Options.Get(dhcpv4.OptionVendorSpecificInformation); !bytes.Equal(got, []byte{6, 1, 8, 255}) {
					t.Errorf("option 43 %x, want PXE_DISCOVERY_CONTROL=8", got)
				}
			}
		})
	}
	t.Run("uuid echoed", func(t *testing.T) {
		ts := newTestServer(t, ModeProxy)
		r, _ := ts.send(t, discover(t, macA, fwOVMF, withUUID), false)
		if r.msg == nil || len(r.msg.Options.Get(dhcpv4.OptionClientMachineIdentifier)) != 17 {
			t.Errorf("option 97 not echoed")
		}
	})
}

func TestDropsBadPackets(t *testing.T) {
	ok := discover(t, macA, fwOVMF)
	tests := []struct {
		name string
		b    func() []byte
	}{
		{"empty", func() []byte { return nil }},
		{"short", func() []byte { return ok.ToBytes()[:100] }},
		{"bad cookie", func() []byte { b := ok.ToBytes(); b[236] = 0; return b }},
		{"boot reply", func() []byte { m := *ok; m.OpCode = dhcpv4.OpcodeBootReply; return m.ToBytes() }},
		{"token ring", func() []byte { m := *ok; m.HWType = 6; return m.ToBytes() }},
		{"long hw address", func() []byte { m := *ok; m.ClientHWAddr = make([]byte, 8); m.ClientHWAddr[0] = 2; return m.ToBytes() }},
		{"multicast mac", func() []byte { m := *ok; m.ClientHWAddr = net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}; return m.ToBytes() }},
		{"zero mac", func() []byte { m := *ok; m.ClientHWAddr = make(net.HardwareAddr, 6); return m.ToBytes() }},
		{"hop loop", func() []byte { m := *ok; m.HopCount = 17; return m.ToBytes() }},
		{"bootp", func() []byte { m := *ok; m.Options = dhcpv4.Options{}; return m.ToBytes() }},
		{"offer from a server", func() []byte {
			m := *ok
			m.Options = dhcpv4.Options{}
			m.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeOffer))
			return m.ToBytes()
		}},
	}
	for _, mode := range []Mode{ModeFull, ModeProxy} {
		for _, tt := range tests {
			t.Run(mode.String()+"/"+tt.name, func(t *testing.T) {
				ts := newTestServer(t, mode)
				r, why := ts.process(context.Background(), tt.b(), nil, false)
				if r.msg != nil {
					t.Fatalf("answered a bad packet: %v", r.msg)
				}
				if why == "" {
					t.Error("no reason for the drop")
				}
			})
		}
	}
}

func TestObserver(t *testing.T) {
	o := &staticObserver{}
	ts := newTestServer(t, ModeProxy, func(c *Config) { c.Observer = o })
	ts.send(t, discover(t, macA, fwOVMF), false)
	ts.send(t, discover(t, macA, fwLinux), false)
	ts.process(context.Background(), []byte("junk"), nil, false)
	if o.n != 2 {
		t.Errorf("observer saw %d packets, want 2 (valid ones only)", o.n)
	}
}

func TestConfigErrors(t *testing.T) {
	good := func() Config {
		return Config{Mode: ModeFull, Interface: "x", ServerIP: serverIP, Netmask: net.CIDRMask(24, 32),
			RangeStart: ip4("10.0.0.100"), RangeEnd: ip4("10.0.0.200")}
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no interface", func(c *Config) { c.Interface = "" }, "interface"},
		{"reversed range", func(c *Config) { c.RangeStart, c.RangeEnd = c.RangeEnd, c.RangeStart }, "after range end"},
		{"range off subnet", func(c *Config) { c.RangeEnd = ip4("10.0.1.5") }, "not inside"},
		{"no range", func(c *Config) { c.RangeStart = nil }, "dhcp.range"},
		{"short lease", func(c *Config) { c.LeaseTime = time.Second }, "lease time"},
		{"ipv6 server", func(c *Config) { c.ServerIP = net.ParseIP("fe80::1") }, "not an IPv4"},
		{"bad mode", func(c *Config) { c.Mode = 9 }, "unknown mode"},
		{"ipv6 dns", func(c *Config) { c.DNS = []net.IP{net.ParseIP("::1")} }, "DNS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.mod(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want error containing %q", err, tt.want)
			}
		})
	}
	c := good()
	c.Mode = ModeProxy
	c.RangeStart = nil
	if _, err := New(c); err != nil {
		t.Errorf("proxy mode needs no range: %v", err)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"full": ModeFull, "proxy": ModeProxy} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("Full"); err == nil {
		t.Error("ParseMode accepted Full")
	}
}

type panickyMachines struct{}

func (panickyMachines) Lookup(net.HardwareAddr) (net.IP, bool) { panic("inventory bug") }
func (panickyMachines) ReservedFor(net.IP) net.HardwareAddr    { return nil }

func TestHandlePacketRecoversFromPanic(t *testing.T) {
	var logs strings.Builder
	ts := newTestServer(t, ModeProxy, func(c *Config) {
		c.Machines = panickyMachines{}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ts.handlePacket(context.Background(), nil, discover(t, macA, fwOVMF).ToBytes(), &net.UDPAddr{}, false)
	if !strings.Contains(logs.String(), "panicked") || !strings.Contains(logs.String(), "inventory bug") {
		t.Errorf("panic not logged:\n%s", logs.String())
	}
}

func TestLogLinesAreReadable(t *testing.T) {
	var logs strings.Builder
	ts := newTestServer(t, ModeFull, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ts.dora(t, macA, fwOVMF)
	ts.send(t, msg(t, dhcpv4.MessageTypeRequest, macB, fwOVMF, requested(ip4("10.0.0.100"))), false)
	for _, want := range []string{
		`msg="dhcp offer" component=dhcp mac=52:54:00:00:00:0a ip=10.0.0.100 firmware=uefi-x64 boot_file=ipxe.efi mode=full`,
		`msg="dhcp ack" component=dhcp mac=52:54:00:00:00:0a ip=10.0.0.100 firmware=uefi-x64 boot_file=ipxe.efi mode=full`,
		`msg="dhcp nak" component=dhcp mac=52:54:00:00:00:0b ip=10.0.0.100`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s\n%s", want, logs.String())
		}
	}
}

func TestFileStoreLeavesOneFile(t *testing.T) {
	dir := t.TempDir()
	fs := NewFileStore(dir + "/leases.json")
	ctx := context.Background()
	if _, err := fs.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := fs.Put(ctx, Lease{MAC: macA, IP: ip4("10.0.0.100"), Expiry: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Put(ctx, Lease{MAC: macB, IP: ip4("10.0.0.101"), Expiry: t0}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(ctx, macA); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("data dir holds %d entries, want only leases.json (temp files left?)", len(ents))
	}
	ls, err := NewFileStore(dir + "/leases.json").Load(ctx)
	if err != nil || len(ls) != 1 || !bytes.Equal(ls[0].MAC, macB) || !ls[0].Expiry.Equal(t0) {
		t.Errorf("reloaded %+v, %v", ls, err)
	}
}
