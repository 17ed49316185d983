package storm

import (
	"bytes"
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/pxe"
)

// TestIdentityAsBootfleetSeesIt decodes each firmware's DISCOVER and asks
// bootfleet's own detector what it is.
func TestIdentityAsBootfleetSeesIt(t *testing.T) {
	mac := net.HardwareAddr{2, 0xbf, 0x57, 0, 0, 1}
	tests := []struct {
		fw     Firmware
		asIPXE bool
		want   string
	}{
		{FirmwareUEFI, false, "uefi-x64"},
		{FirmwareUEFI, true, "ipxe-uefi-x64"},
		{FirmwareBIOS, false, "bios"},
		{FirmwareBIOS, true, "ipxe-bios"},
		{FirmwareIPXE, true, "ipxe-bios"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			m := newClientMessage(dhcpv4.MessageTypeDiscover, mac, dhcpv4.TransactionID{1, 2, 3, 4}, 0, identity(tt.fw, tt.asIPXE))
			back, err := dhcpv4.FromBytes(m.ToBytes())
			if err != nil {
				t.Fatal(err)
			}
			c := pxe.Detect(back)
			if got := c.Firmware(); got != tt.want {
				t.Fatalf("bootfleet detects %q, want %q (vendor class %q)", got, tt.want, c.VendorClass)
			}
			if !c.PXE {
				t.Errorf("option 60 %q: want PXEClient", c.VendorClass)
			}
			if !bytes.Equal(back.ClientHWAddr, mac) || back.Flags&0x8000 == 0 {
				t.Errorf("chaddr %v flags %#x: want %v and the broadcast flag", back.ClientHWAddr, back.Flags, mac)
			}
		})
	}
}

func TestParseVendorOptions(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    map[byte][]byte
		wantErr bool
	}{
		{"bootfleet's proxy option 43", []byte{6, 1, 8, 0xff}, map[byte][]byte{6: {8}}, false},
		{"pads and no end", []byte{0, 0, 6, 1, 3, 9, 2, 'a', 'b'}, map[byte][]byte{6: {3}, 9: []byte("ab")}, false},
		{"stops at end", []byte{255, 6, 1}, map[byte][]byte{}, false},
		{"truncated value", []byte{6, 4, 1}, nil, true},
		{"missing length", []byte{6}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVendorOptions(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("tag %d: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func FuzzParseVendorOptions(f *testing.F) {
	f.Add([]byte{6, 1, 8, 0xff})
	f.Add([]byte{176, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		opts, err := ParseVendorOptions(b)
		if err != nil {
			return
		}
		n := 0
		for _, v := range opts {
			n += len(v)
		}
		if n > len(b) {
			t.Fatalf("%d value bytes out of %d input bytes", n, len(b))
		}
	})
}

// offer builds a DHCPOFFER as a server would.
func offer(yiaddr, server string, bootFile string, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{OpCode: dhcpv4.OpcodeBootReply, YourIPAddr: net.ParseIP(yiaddr).To4(),
		ServerIPAddr: net.IPv4zero.To4(), Options: dhcpv4.Options{}}
	m.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeOffer))
	m.UpdateOption(dhcpv4.OptServerIdentifier(net.ParseIP(server)))
	if bootFile != "" {
		m.ServerIPAddr = net.ParseIP(server).To4()
		m.UpdateOption(dhcpv4.OptBootFileName(bootFile))
	}
	for _, o := range opts {
		m.UpdateOption(o)
	}
	return m
}

func TestSelectOffers(t *testing.T) {
	pxeClient := dhcpv4.OptClassIdentifier("PXEClient")
	noDiscovery := dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, []byte{6, 1, 8, 0xff})
	binl := dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, []byte{6, 1, 0, 0xff})
	noWait := dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(175), []byte{176, 1, 1})
	full := offer("10.0.0.100", "10.0.0.1", "ipxe.efi")
	plain := offer("10.0.0.50", "10.0.0.2", "")
	proxy := offer("0.0.0.0", "10.0.0.1", "ipxe.efi", pxeClient, noDiscovery)
	binlProxy := offer("0.0.0.0", "10.0.0.1", "ipxe.efi", pxeClient, binl)
	script := offer("10.0.0.100", "10.0.0.1", "http://10.0.0.1:8080/ipxe/x", noWait)
	scriptWaits := offer("10.0.0.100", "10.0.0.1", "http://10.0.0.1:8080/ipxe/x")
	tests := []struct {
		name         string
		offers       []*dhcpv4.DHCPv4
		asIPXE       bool
		lease, boot  *dhcpv4.DHCPv4
		wantComplete bool
	}{
		{"full server", []*dhcpv4.DHCPv4{full}, false, full, full, true},
		{"address only: wait for a proxy", []*dhcpv4.DHCPv4{plain}, false, plain, nil, false},
		{"address, then proxy", []*dhcpv4.DHCPv4{plain, proxy}, false, plain, proxy, true},
		{"proxy, then address", []*dhcpv4.DHCPv4{proxy, plain}, false, plain, proxy, true},
		{"a full offer wins over address + proxy", []*dhcpv4.DHCPv4{plain, proxy, full}, false, full, full, true},
		{"BINL proxy is not booted from", []*dhcpv4.DHCPv4{plain, binlProxy}, false, plain, nil, false},
		{"proxy alone", []*dhcpv4.DHCPv4{proxy}, false, nil, nil, false},
		{"iPXE with no-pxedhcp stops at once", []*dhcpv4.DHCPv4{script}, true, script, script, true},
		{"iPXE without it waits for proxies", []*dhcpv4.DHCPv4{scriptWaits}, true, scriptWaits, scriptWaits, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var infos []offerInfo
			for _, o := range tt.offers {
				back, err := dhcpv4.FromBytes(o.ToBytes())
				if err != nil {
					t.Fatal(err)
				}
				infos = append(infos, classifyOffer(back))
			}
			sel, complete := selectOffers(infos, tt.asIPXE)
			if complete != tt.wantComplete {
				t.Errorf("complete = %v, want %v", complete, tt.wantComplete)
			}
			check := func(what string, got *offerInfo, want *dhcpv4.DHCPv4) {
				switch {
				case want == nil && got != nil:
					t.Errorf("%s: got the offer from %v, want none", what, got.msg.ServerIdentifier())
				case want != nil && got == nil:
					t.Errorf("%s: got none, want the offer of %v", what, want.YourIPAddr)
				case want != nil && (!got.msg.YourIPAddr.Equal(want.YourIPAddr) || got.msg.ServerIdentifier().String() != want.ServerIdentifier().String()):
					t.Errorf("%s: got %v from %v, want %v from %v", what, got.msg.YourIPAddr, got.msg.ServerIdentifier(), want.YourIPAddr, want.ServerIdentifier())
				}
			}
			check("lease", sel.lease, tt.lease)
			check("boot", sel.boot, tt.boot)
		})
	}
}
