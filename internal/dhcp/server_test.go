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
		{name: "ipxe discover gets script, no option 175 (iPXE reads no-pxedhcp only from its address offer)",
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
			req := tt.req(t)
			r, why := ts.send(t, req, tt.bs)
			check(t, req, r, why, tt.want)
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

func TestHandlePacketRecoversFromPanic(t *testing.T) {
	var logs strings.Builder
	ts := newTestServer(t, ModeProxy, func(c *Config) {
		c.Machines = panickyMachines{}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ts.handlePacket(context.Background(), nil, discover(t, macA, fwOVMF).ToBytes(), &net.UDPAddr{}, nil, false)
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

func (f *failingStore) Put(ctx context.Context, l Lease) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.LeaseStore.Put(ctx, l)
}

func (panickyMachines) Lookup(net.HardwareAddr) (net.IP, bool) { panic("inventory bug") }
func (panickyMachines) ReservedFor(net.IP) net.HardwareAddr    { return nil }
