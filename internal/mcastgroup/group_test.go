package mcastgroup

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestParseSpace(t *testing.T) {
	for _, tc := range []struct {
		in       string
		explicit bool
		want     string // the space's prefix, or "" when refused
		err      error
	}{
		{"", false, "239.0.0.0/8", nil},
		{"239.10.0.0/16", false, "239.10.0.0/16", nil},
		{" 239.10.3.4/16 ", false, "239.10.0.0/16", nil},
		{"239.1.2.3", false, "239.1.2.3/32", nil},
		{"238.0.0.0/8", false, "", ErrNotAdminScoped},
		{"238.0.0.0/8", true, "238.0.0.0/8", nil},
		{"224.1.0.0/16", false, "", ErrNotAdminScoped},
		{"224.1.0.0/16", true, "224.1.0.0/16", nil},
		{"224.0.0.0/4", false, "", ErrNotMulticast},
		{"224.0.0.0/4", true, "", ErrNotMulticast},
		{"224.0.0.0/24", true, "", ErrNotMulticast},
		{"224.0.0.251", true, "", ErrNotMulticast},
		{"239.0.0.0/7", false, "", ErrNotAdminScoped},
		{"10.0.0.0/8", true, "", ErrNotMulticast},
		{"ff15::/16", true, "", ErrNotMulticast},
		{"239.0.0.0/33", false, "", ErrNotMulticast},
		{"nonsense", false, "", ErrNotMulticast},
		{"239.0.0.0/24", false, "", ErrNoUsableGroup},
		{"239.128.0.7", false, "", ErrNoUsableGroup},
		{"239.255.255.250", false, "", ErrNoUsableGroup},
		{"239.0.1.0/24", false, "239.0.1.0/24", nil},
	} {
		t.Run(fmt.Sprintf("%s explicit=%v", tc.in, tc.explicit), func(t *testing.T) {
			s, err := ParseSpace(tc.in, tc.explicit)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, %v; want error %v", s.Prefix(), err, tc.err)
				}
				return
			}
			if err != nil || s.Prefix().String() != tc.want {
				t.Fatalf("got %v, %v; want %s", s.Prefix(), err, tc.want)
			}
		})
	}
}

// TestGroupIsStable pins the groups of two contents: every server of a
// fleet, of every release, must pick the same group for the same content.
func TestGroupIsStable(t *testing.T) {
	def, _ := ParseSpace("", false)
	small, _ := ParseSpace("239.66.0.0/16", false)
	for _, tc := range []struct {
		space   Space
		content string
		want    string
	}{
		{def, "debian-12", "239.87.228.235"},
		{def, "debian-12-desktop", "239.98.95.146"},
		{small, "debian-12", "239.66.228.235"},
	} {
		if got := tc.space.Group(sha256.Sum256([]byte(tc.content))).String(); got != tc.want {
			t.Errorf("Group(%s) in %v: got %s, want %s", tc.content, tc.space.Prefix(), got, tc.want)
		}
	}
}

func TestGroupStaysInSpaceAndUsable(t *testing.T) {
	for _, in := range []string{"", "239.200.0.0/16", "239.0.0.0/23", "239.128.0.0/23", "239.255.255.248/29", "239.9.9.9"} {
		s, err := ParseSpace(in, false)
		if err != nil {
			t.Fatalf("ParseSpace(%q): %v", in, err)
		}
		seen := map[netip.Addr]bool{}
		for i := range 2000 {
			g := s.Group(sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
			if !s.Prefix().Contains(g) || !Usable(g) {
				t.Fatalf("space %v gave %v: outside it or unusable", s.Prefix(), g)
			}
			seen[g] = true
		}
		// 2000 contents in 2^24 addresses should nearly never share one.
		if s.Prefix().Bits() == 8 && len(seen) < 1990 {
			t.Errorf("space %v: 2000 contents got only %d groups", s.Prefix(), len(seen))
		}
	}
}

func TestUsable(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"239.0.0.1", false},     // 01:00:5e:00:00:01, as 224.0.0.1
		{"239.128.0.200", false}, // 01:00:5e:00:00:c8, as 224.0.0.200
		{"225.0.0.9", false},
		{"239.0.1.0", true},
		{"239.128.1.0", true},
		{"239.255.255.250", false},
		{"239.255.255.251", true},
		{"10.0.0.1", false},
		{"ff02::1", false},
	} {
		if got := Usable(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Usable(%s): got %v, want %v", tc.addr, got, tc.want)
		}
	}
}
