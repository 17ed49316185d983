package rootarg

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

func TestParseMulticast(t *testing.T) {
	good := "239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef"
	m, err := ParseMulticast(good)
	if err != nil {
		t.Fatal(err)
	}
	want := Multicast{Group: netip.MustParseAddrPort("239.1.2.3:10810"), Server: netip.MustParseAddrPort("10.0.0.1:10810"),
		Content: chunkwire.ContentID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}}
	if m != want || m.Arg() != good {
		t.Fatalf("got %+v (%s), want %+v", m, m.Arg(), want)
	}
	for _, bad := range []struct{ in, says string }{
		{"239.1.2.3:10810,10.0.0.1:10810", "3"},
		{"10.1.2.3:10810,10.0.0.1:10810,0123456789abcdef", "multicast"},
		{"239.1.2.3:0,10.0.0.1:10810,0123456789abcdef", "group"},
		{"239.1.2.3:10810,239.0.0.1:10810,0123456789abcdef", "unicast"},
		{"239.1.2.3:10810,0.0.0.0:10810,0123456789abcdef", "unicast"},
		{"239.1.2.3:10810,[fd00::1]:10810,0123456789abcdef", "IPv4"},
		{"239.1.2.3:10810,10.0.0.1:10810,0123456789ABCDEF", "lower-case"},
		{"239.1.2.3:10810,10.0.0.1:10810,0123456789abcdeg", "hex"},
	} {
		if _, err := ParseMulticast(bad.in); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("ParseMulticast(%q) = %v, want an error saying %q", bad.in, err, bad.says)
		}
	}
}

func TestMulticastFromCmdline(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"quiet", false},
		{"bootfleet.mcast=239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef", true},
		{"bootfleet.mcast=239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef bootfleet.mcast=off", false},
	} {
		_, ok, err := MulticastFromCmdline(tc.in)
		if err != nil || ok != tc.ok {
			t.Errorf("MulticastFromCmdline(%q) = %v, %v; want %v", tc.in, ok, err, tc.ok)
		}
	}
	if _, _, err := MulticastFromCmdline("bootfleet.mcast=x"); err == nil {
		t.Error("a malformed bootfleet.mcast= was taken")
	}
}

func FuzzParseMulticast(f *testing.F) {
	f.Add("239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMulticast(s)
		if err != nil {
			return
		}
		if !m.Group.Addr().IsMulticast() || m.Server.Addr().IsMulticast() {
			t.Fatalf("ParseMulticast(%q) accepted %+v", s, m)
		}
		back, err := ParseMulticast(m.Arg())
		if err != nil || back != m {
			t.Fatalf("%+v does not survive its own form: %+v, %v", m, back, err)
		}
	})
}
