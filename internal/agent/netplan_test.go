package agent

import (
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

func TestPlanNetwork(t *testing.T) {
	for _, tc := range []struct {
		root string
		want NetPlan
	}{
		{"nbd:10.0.0.1:10809:x", NetPlan{DHCPv4: true}},
		{"nbd:[fd00::1]:10809:x", NetPlan{IPv6: true}},
		{"nbd:[fd00::1]:10809,[fd00::2]:10809:x", NetPlan{IPv6: true}},
		{"nbd:[fd00::1]:10809,10.0.0.2:10809:x", NetPlan{DHCPv4: true, IPv6: true}},
		// A name needs the name server only a DHCPv4 lease gives.
		{"nbd:[fd00::1]:10809,boot.lab:10809:x", NetPlan{DHCPv4: true, IPv6: true}},
	} {
		tg, err := rootarg.Parse(tc.root)
		if err != nil {
			t.Fatal(err)
		}
		if got := PlanNetwork(tg); got != tc.want {
			t.Errorf("PlanNetwork(%s) = %+v, want %+v", tc.root, got, tc.want)
		}
	}
}

// TestUsableIPv6: from a /proc/net/if_inet6 of a NIC that has its SLAAC
// address, a tentative one, one whose DAD failed and a link-local one,
// only the global addresses DAD passed on that NIC count.
func TestUsableIPv6(t *testing.T) {
	text, err := os.ReadFile("testdata/if_inet6")
	if err != nil {
		t.Fatal(err)
	}
	got, err := UsableIPv6(string(text), "eth0")
	want := []netip.Prefix{netip.MustParsePrefix("fd00:2130::5054:fffe:e2e0:7001/64"), netip.MustParsePrefix("2001:db80::123/128")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("UsableIPv6 = %v, %v; want %v", got, err, want)
	}
	if got, err := UsableIPv6(string(text), "eth9"); err != nil || len(got) != 0 {
		t.Errorf("UsableIPv6 of a NIC not in the file = %v, %v; want none", got, err)
	}
	for _, bad := range []string{
		"fd00 02 40 00 00 eth0",
		"zz002130000000005054fffee2e07001 02 40 00 00 eth0",
		"fd002130000000005054fffee2e07001 02 81 00 00 eth0",
		"fd002130000000005054fffee2e07001 02 40 00 eth0",
	} {
		if _, err := UsableIPv6(bad, "eth0"); err == nil || !strings.Contains(err.Error(), "if_inet6 line 1") {
			t.Errorf("UsableIPv6(%q) = %v, want an error naming the line", bad, err)
		}
	}
}

// FuzzUsableIPv6: any text either gives global, non-link-local prefixes
// of at most 128 bits or an error; never a panic. Seeds are in
// testdata/fuzz/FuzzUsableIPv6.
func FuzzUsableIPv6(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		got, err := UsableIPv6(text, "eth0")
		if err != nil {
			return
		}
		for _, p := range got {
			if !p.IsValid() || !p.Addr().Is6() || !p.Addr().IsGlobalUnicast() {
				t.Fatalf("UsableIPv6(%q) returned %v", text, p)
			}
		}
	})
}
