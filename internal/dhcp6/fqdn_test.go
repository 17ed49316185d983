package dhcp6

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// TestFQDNGolden: a client that sends option 39 (as systemd-networkd and
// dhclient -6 do, asking the server to update its AAAA record with S)
// gets its inventory name back with S 0, N 1 and O 1 (RFC 4704 section
// 4.2); one that sends none, or has no name, gets no option 39. The
// replies' wire bytes are in testdata/golden/fqdn.golden
// (UPDATE_TESTDATA=1 rewrites it).
func TestFQDNGolden(t *testing.T) {
	s := newTestServer(t, "fd00:213::1ff")
	names := map[string]string{macA.String(): "pc1"}
	s.cfg.HostName = func(mac net.HardwareAddr) string { return names[mac.String()] }
	fq := func(h string) dhcpv6.Modifier {
		b, _ := hex.DecodeString(h)
		var o dhcpv6.OptFQDN
		if err := o.FromBytes(b); err != nil {
			t.Fatal(err)
		}
		return dhcpv6.WithOption(&o)
	}
	var sb strings.Builder
	for _, c := range []struct {
		what string
		mac  net.HardwareAddr
		mods []dhcpv6.Modifier
		want string // option 39 body in hex; "" for none
	}{
		{"named, S asked, partial name", macA, []dhcpv6.Modifier{fq("01" + "06636c69656e74")}, "0603706331"},
		{"named, no option 39", macA, nil, ""},
		{"unnamed, option 39", macB, []dhcpv6.Modifier{fq("00")}, ""},
	} {
		for _, typ := range []dhcpv6.MessageType{dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest} {
			mods := c.mods
			if typ == dhcpv6.MessageTypeRequest {
				mods = append(append([]dhcpv6.Modifier{}, mods...), dhcpv6.WithServerID(s.duid))
			}
			out, why := s.process(msg(t, typ, c.mac, mods...), peerA)
			if out == nil {
				t.Fatalf("%s %v: no reply: %s", c.what, typ, why)
			}
			wire := out.ToBytes()
			back, err := dhcpv6.MessageFromBytes(wire)
			if err != nil {
				t.Fatalf("%s: reply does not decode: %v", c.what, err)
			}
			// The bytes as sent: the library re-encodes partial names as
			// fully qualified ones.
			got := rawOption(wire, uint16(dhcpv6.OptionFQDN))
			if got != c.want {
				t.Errorf("%s %v: option 39 %q, want %q", c.what, typ, got, c.want)
			}
			fmt.Fprintf(&sb, "=== %s: %v from %v\n%s\noption 39: %s\nwire: %x\n\n", c.what, typ, c.mac, back.Summary(), got, wire)
		}
	}
	path := filepath.Join("testdata", "golden", "fqdn.golden")
	if os.Getenv("UPDATE_TESTDATA") == "1" {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run UPDATE_TESTDATA=1 go test ./internal/dhcp6/ to create it", err)
	}
	if string(want) != sb.String() {
		t.Fatalf("%s differs from the replies:\n%s\n(UPDATE_TESTDATA=1 rewrites it after review)", path, sb.String())
	}
}

// rawOption finds a top-level option in a DHCPv6 message's wire bytes
// and returns its body in hex.
func rawOption(b []byte, code uint16) string {
	for i := 4; i+4 <= len(b); {
		c, n := uint16(b[i])<<8|uint16(b[i+1]), int(b[i+2])<<8|int(b[i+3])
		if i+4+n > len(b) {
			break
		}
		if c == code {
			return hex.EncodeToString(b[i+4 : i+4+n])
		}
		i += 4 + n
	}
	return ""
}
