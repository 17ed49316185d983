package machineview

import (
	"net"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func hw(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// testInput is a fleet of two enrolled machines where machines with no
// profile boot linux.
func testInput() Input {
	return Input{
		Profiles: map[string]inventory.Profile{
			"linux":  {Name: "linux", Kernel: "/k", Cmdline: "a"},
			"rescue": {Name: "rescue", Kernel: "/r", Cmdline: "b"},
		},
		Machines: []Machine{
			{MAC: hw("52:54:00:12:34:56"), Name: "pc1", Profile: "rescue", IP: net.IPv4(10, 0, 0, 50), Enrolled: true},
			{MAC: hw("52:54:00:00:00:02"), Name: "pc2", Enrolled: true},
		},
		DefaultProfile: "linux",
		UnknownProfile: "linux",
	}
}

func TestResolve(t *testing.T) {
	v, err := New(testInput())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mac, profile, name, ip string
		known                  bool
	}{
		{"52:54:00:12:34:56", "rescue", "pc1", "10.0.0.50", true},
		{"52:54:00:00:00:02", "linux", "pc2", "<nil>", true},
		{"52:54:00:99:99:99", "linux", "", "<nil>", false},
	}
	for _, tt := range tests {
		t.Run(tt.mac, func(t *testing.T) {
			mac, _ := net.ParseMAC(tt.mac)
			got, ok := v.Resolve(mac)
			if !ok {
				t.Fatal("not bootable")
			}
			if got.Profile != tt.profile || got.Machine.Name != tt.name || got.Known != tt.known || got.Machine.IP.String() != tt.ip {
				t.Fatalf("got %+v, want profile %s name %s known %v ip %s", got, tt.profile, tt.name, tt.known, tt.ip)
			}
			ip, boot := v.Lookup(mac)
			if !boot || ip.String() != tt.ip {
				t.Fatalf("Lookup = %v, %v", ip, boot)
			}
			if ip != nil && v.ReservedFor(ip).String() != tt.mac {
				t.Fatalf("ReservedFor(%v) = %v, want %s", ip, v.ReservedFor(ip), tt.mac)
			}
		})
	}
}

func TestNoDefaultProfileMeansNoBoot(t *testing.T) {
	in := testInput()
	in.DefaultProfile, in.UnknownProfile = "", ""
	v, err := New(in)
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("52:54:00:99:99:99")
	if _, ok := v.Resolve(mac); ok {
		t.Fatal("unlisted machine without default_profile must not boot")
	}
	if _, boot := v.Lookup(mac); boot {
		t.Fatal("Lookup says boot")
	}
}

func TestReservedForUnreserved(t *testing.T) {
	v, err := New(testInput())
	if err != nil {
		t.Fatal(err)
	}
	if got := v.ReservedFor(net.IPv4(10, 0, 0, 51)); got != nil {
		t.Fatalf("got %v for an unreserved address", got)
	}
}

func TestDiscoveryPolicy(t *testing.T) {
	unknown, _ := net.ParseMAC("52:54:00:99:99:99")
	listedNoProfile, _ := net.ParseMAC("52:54:00:00:00:02")
	discovered, _ := net.ParseMAC("52:54:00:00:00:0d")
	tests := []struct {
		name, unknownProfile                string
		unknownWant, listedWant, discovWant string // "" = not booted
	}{
		{"default boots everyone", "linux", "linux", "linux", "linux"},
		{"discovery profile", "rescue", "rescue", "linux", "rescue"},
		{"ignore", "", "", "linux", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput()
			in.UnknownProfile = tt.unknownProfile
			in.Machines = append(in.Machines, Machine{MAC: discovered}) // not enrolled
			v, err := New(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range []struct {
				mac  net.HardwareAddr
				want string
			}{{unknown, tt.unknownWant}, {listedNoProfile, tt.listedWant}, {discovered, tt.discovWant}} {
				got, ok := v.Resolve(ch.mac)
				if !ok {
					got.Profile = ""
				}
				if got.Profile != ch.want {
					t.Errorf("%s boots %q, want %q", ch.mac, got.Profile, ch.want)
				}
			}
		})
	}
}

func TestEnrolled(t *testing.T) {
	listed, _ := net.ParseMAC("52:54:00:00:00:01")
	found, _ := net.ParseMAC("52:54:00:00:00:02")
	stranger, _ := net.ParseMAC("52:54:00:00:00:03")
	v, err := New(Input{Profiles: map[string]inventory.Profile{"p": {Name: "p", Kernel: "/k"}}, DefaultProfile: "p", UnknownProfile: "p",
		Machines: []Machine{{MAC: listed, Enrolled: true}, {MAC: found}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mac  net.HardwareAddr
		want bool
	}{{"listed", listed, true}, {"discovered", found, false}, {"never seen", stranger, false}, {"too long", make(net.HardwareAddr, 30), false}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := v.Enrolled(tc.mac); got != tc.want {
				t.Errorf("Enrolled(%v) = %v, want %v", tc.mac, got, tc.want)
			}
		})
	}
}

// TestMachineChannel: a machine's own root channel (a pin or a channel)
// wins over its profile's; without one the profile's holds; a profile
// with no root image takes none; the profile itself is left as it was.
func TestMachineChannel(t *testing.T) {
	in := Input{
		Profiles: map[string]inventory.Profile{
			"lab":   {Name: "lab", Kernel: "/k", Root: inventory.Root{Image: "deb", Channel: inventory.ChannelTest}},
			"plain": {Name: "plain", Kernel: "/k"},
		},
		Machines: []Machine{
			{MAC: hw("52:54:00:00:00:01"), Profile: "lab", Channel: "2", Enrolled: true},
			{MAC: hw("52:54:00:00:00:02"), Profile: "lab", Channel: inventory.ChannelProduction, Enrolled: true},
			{MAC: hw("52:54:00:00:00:03"), Profile: "lab", Enrolled: true},
			{MAC: hw("52:54:00:00:00:04"), Profile: "plain", Channel: "3", Enrolled: true},
		},
	}
	v, err := New(in)
	if err != nil {
		t.Fatal(err)
	}
	for mac, want := range map[string]string{
		"52:54:00:00:00:01": "2",
		"52:54:00:00:00:02": inventory.ChannelProduction,
		"52:54:00:00:00:03": inventory.ChannelTest,
		"52:54:00:00:00:04": "",
	} {
		tg, ok := v.Resolve(hw(mac))
		if !ok || tg.Spec.Root.Channel != want {
			t.Errorf("%s boots channel %q (ok %v), want %q", mac, tg.Spec.Root.Channel, ok, want)
		}
	}
	if p, _ := v.Profile("lab"); p.Root.Channel != inventory.ChannelTest {
		t.Errorf("profile lab's channel became %q, want test still", p.Root.Channel)
	}
}
