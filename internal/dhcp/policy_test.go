package dhcp

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
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
	noProxy  bool   // option 175 is exactly sub-option 176 (no-pxedhcp) = 1; else absent
}

// check holds the reply r to the request req against w.
func check(t *testing.T, req *dhcpv4.DHCPv4, r reply, why string, w want) {
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
	enc := m.Options.Get(dhcpv4.GenericOptionCode(pxe.OptionIPXEEncap))
	if w.noProxy && !bytes.Equal(enc, []byte{176, 1, 1}) {
		t.Errorf("option 175 %x, want b00101 (no-pxedhcp = 1)", enc)
	}
	if !w.noProxy && m.Options.Has(dhcpv4.GenericOptionCode(pxe.OptionIPXEEncap)) {
		t.Errorf("option 175 %x present, want absent", enc)
	}
	if !bytes.Equal(m.ClientHWAddr, req.ClientHWAddr) {
		t.Errorf("reply chaddr %v, want the request's %v", m.ClientHWAddr, req.ClientHWAddr)
	}
	if m.OpCode != dhcpv4.OpcodeBootReply {
		t.Errorf("reply op %v, want BOOTREPLY", m.OpCode)
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
		{name: "ipxe gets its script, never ipxe.efi, and is told not to wait for proxydhcp",
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwIPXE) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: script, lease: true, noProxy: true}},
		{name: "ipxe known only by option 175 is told not to wait for proxydhcp",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return discover(t, macA, fwOVMF, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(pxe.OptionIPXEEncap), []byte{19, 1, 1}))
			},
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, bootFile: script, lease: true, noProxy: true}},
		{name: "ipxe ack also says no proxydhcp",
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, fwIPXE, requested(ip4("10.0.0.101")), serverID(serverIP))
			},
			want: want{typ: dhcpv4.MessageTypeAck, yiaddr: "10.0.0.101", dest: bcast, bootFile: script, lease: true, noProxy: true}},
		{name: "ipxe machine not to boot gets address only, may wait for another proxydhcp",
			cfg:  []func(*Config){reserveA("10.0.0.50", false)},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwIPXE) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.50", dest: bcast, lease: true}},
		{name: "ipxe without an http base gets address only",
			cfg:  []func(*Config){func(c *Config) { c.Plan.HTTPBase = "" }},
			req:  func(t *testing.T) *dhcpv4.DHCPv4 { return discover(t, macA, fwIPXE) },
			want: want{typ: dhcpv4.MessageTypeOffer, yiaddr: "10.0.0.100", dest: bcast, lease: true}},
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
			req := tt.req(t)
			r, why := ts.send(t, req, tt.bs)
			check(t, req, r, why, tt.want)
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

// TestBootFileOfLongURL: a URL too long for the 128-byte file field is
// only in option 67, and logs and OnReply must still name it.
func TestBootFileOfLongURL(t *testing.T) {
	long := "http://10.0.0.1:8080/files/" + strings.Repeat("x", 120) + ".efi"
	m := &dhcpv4.DHCPv4{Options: dhcpv4.Options{}}
	(&Server{cfg: Config{ServerIP: ip4("10.0.0.1")}}).bootOptions(m, pxe.Plan{Proto: pxe.ProtoHTTP, BootFile: long, VendorClass: pxe.VendorHTTP})
	if m.BootFileName != "" {
		t.Fatalf("file field %q: a %d-byte URL does not fit in it", m.BootFileName, len(long))
	}
	if got := bootFile(m); got != long {
		t.Errorf("bootFile = %q, want option 67's %q", got, long)
	}
	m.Options.Del(dhcpv4.OptionBootfileName)
	m.BootFileName = "ipxe.efi"
	if got := bootFile(m); got != "ipxe.efi" {
		t.Errorf("bootFile without option 67 = %q, want the file field's ipxe.efi", got)
	}
}
