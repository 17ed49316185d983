package dhcp

import (
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestHostNameGolden runs a Linux client's DISCOVER and REQUEST (as busybox
// udhcpc -F sends them: option 55 asks for 12, option 81 with E and S)
// through a full-mode server that knows the machine as pc1, and compares
// the replies' wire bytes with testdata/golden/hostname.golden
// (UPDATE_TESTDATA=1 rewrites it). A machine without a name, and one
// whose option 81 is malformed, are in the same file.
func TestHostNameGolden(t *testing.T) {
	names := map[string]string{macA.String(): "pc1", macC.String(): "pc3.lab.example"}
	ts := newTestServer(t, ModeFull, func(c *Config) {
		c.HostName = func(mac net.HardwareAddr) string { return names[mac.String()] }
	})
	prl := dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer, dhcpv4.OptionHostName)
	fqdnOpt := func(b string) dhcpv4.Modifier {
		v, _ := hex.DecodeString(b)
		return dhcpv4.WithGeneric(dhcpv4.OptionFQDN, v)
	}
	xid := func(n byte) dhcpv4.Modifier {
		return dhcpv4.WithTransactionID(dhcpv4.TransactionID{0xb0, 0x07, 0xf1, n})
	}
	var sb strings.Builder
	for _, c := range []struct {
		what string
		mac  net.HardwareAddr
		mods []dhcpv4.Modifier
	}{
		{"named, option 81 wire form with S", macA, []dhcpv4.Modifier{xid(1), prl, fqdnOpt("050000" + "03706331")}},
		{"named, no option 81", macA, []dhcpv4.Modifier{xid(2), prl}},
		{"unnamed, option 81", macB, []dhcpv4.Modifier{xid(3), prl, fqdnOpt("050000")}},
		{"dotted name, option 81 ASCII form", macC, []dhcpv4.Modifier{xid(4), prl, fqdnOpt("000000")}},
		{"named, malformed option 81", macA, []dhcpv4.Modifier{xid(5), prl, fqdnOpt("05000009")}},
	} {
		var offered net.IP
		for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest} {
			mods := append([]dhcpv4.Modifier{}, c.mods...)
			if typ == dhcpv4.MessageTypeRequest {
				mods = append(mods, requested(offered), serverID(serverIP))
			}
			req := msg(t, typ, c.mac, fwLinux, mods...)
			r, why := ts.send(t, req, false)
			if r.msg == nil {
				t.Fatalf("%s %v: no reply: %s", c.what, typ, why)
			}
			wire := r.msg.ToBytes()
			back, err := dhcpv4.FromBytes(wire)
			if err != nil {
				t.Fatalf("%s: reply does not decode: %v", c.what, err)
			}
			// Invariants a careless UPDATE_TESTDATA must not bless.
			want := names[c.mac.String()]
			if got := back.HostName(); got != want {
				t.Errorf("%s %v: option 12 %q, want %q", c.what, typ, got, want)
			}
			fmt.Fprintf(&sb, "=== %s: %v from %v\n%s", c.what, typ, c.mac, back.Summary())
			fmt.Fprintf(&sb, "option 12: %x\noption 81: %x\nwire: %x\n\n",
				back.Options.Get(dhcpv4.OptionHostName), back.Options.Get(dhcpv4.OptionFQDN), wire)
			offered = back.YourIPAddr
		}
	}
	compareGolden(t, filepath.Join("testdata", "golden", "hostname.golden"), sb.String())
}
