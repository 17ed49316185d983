package agent

import (
	"net"
	"strings"
	"testing"
)

func TestParseLease(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	for _, tc := range []struct {
		name, in, wantErr string
		check             func(Lease) bool
	}{
		{name: "full", in: "interface=eth0\nip=10.0.0.5\nmask=16\nrouter=10.0.0.1 10.0.0.2\ndns=10.0.0.1 10.0.0.3\n",
			check: func(l Lease) bool {
				return l.Interface == "eth0" && l.Address.String() == "10.0.0.5/16" && l.Router.String() == "10.0.0.1" && len(l.DNS) == 2
			}},
		{name: "mask defaults to 24, no router", in: "interface=eth1\nip=10.1.2.3\n",
			check: func(l Lease) bool { return l.Address.String() == "10.1.2.3/24" && !l.Router.IsValid() && l.DNS == nil }},
		{name: "IPv6 from SLAAC", in: "interface=eth0\nip=fd00:213::5054:ff:fe12:3456\nmask=64\n",
			check: func(l Lease) bool {
				return l.Address.String() == "fd00:213::5054:ff:fe12:3456/64" && !l.Router.IsValid()
			}},
		{name: "no interface", in: "ip=10.0.0.5\n", wantErr: "no interface"},
		{name: "bad ip", in: "interface=eth0\nip=10.0.0\n", wantErr: "not an IP address"},
		{name: "bad mask", in: "interface=eth0\nip=10.0.0.1\nmask=40\n", wantErr: "not an IP address"},
		{name: "bad router", in: "interface=eth0\nip=10.0.0.1\nrouter=x\n", wantErr: "router="},
		{name: "bad dns", in: "interface=eth0\nip=10.0.0.1\ndns=1.2.3.4 y\n", wantErr: "dns="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ParseLease(tc.in, mac)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseLease = %+v, %v; want error containing %q", l, err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(l) {
				t.Fatalf("ParseLease = %+v, %v", l, err)
			}
		})
	}
}

func TestHandoffFiles(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	l, err := ParseLease("interface=eth0\nip=10.0.0.5\nmask=24\nrouter=10.0.0.1\ndns=10.0.0.53\n", mac)
	if err != nil {
		t.Fatal(err)
	}
	files := HandoffFiles(l)
	nd := files["systemd/network/00-bootfleet-root.network"]
	for _, want := range []string{"MACAddress=52:54:00:12:34:56", "KeepConfiguration=yes", "Address=10.0.0.5/24", "Gateway=10.0.0.1", "DNS=10.0.0.53", "RequiredForOnline=yes"} {
		if !strings.Contains(nd, want) {
			t.Errorf("networkd file lacks %q:\n%s", want, nd)
		}
	}
	if strings.Contains(nd, "DHCP=") {
		t.Errorf("networkd file must not start a second DHCP client on the root's NIC:\n%s", nd)
	}
	if link := files["systemd/network/00-bootfleet-root.link"]; !strings.Contains(link, "MACAddress=52:54:00:12:34:56") || !strings.Contains(link, "Name=eth0") {
		t.Errorf("udev .link file must keep the name eth0 for the MAC: %q", link)
	}
	if nm := files["NetworkManager/conf.d/90-bootfleet-root.conf"]; !strings.Contains(nm, "unmanaged-devices=mac:52:54:00:12:34:56") {
		t.Errorf("NetworkManager file: %q", nm)
	}
	if strings.Contains(nd, "IPv6AcceptRA") {
		t.Errorf("an IPv4 lease must leave networkd's router advertisement default alone:\n%s", nd)
	}
	l6, err := ParseLease("interface=eth0\nip=fd00:213::5\nmask=64\n", mac)
	if err != nil {
		t.Fatal(err)
	}
	if nd := HandoffFiles(l6)["systemd/network/00-bootfleet-root.network"]; !strings.Contains(nd, "Address=fd00:213::5/64") || !strings.Contains(nd, "IPv6AcceptRA=yes") {
		t.Errorf("an IPv6 root's networkd file must keep the SLAAC address and follow router advertisements:\n%s", nd)
	}
	l.MAC = nil
	files = HandoffFiles(l)
	if nd := files["systemd/network/00-bootfleet-root.network"]; !strings.Contains(nd, "Name=eth0") {
		t.Errorf("without a MAC the networkd file must match by name:\n%s", nd)
	}
	for _, f := range []string{"NetworkManager/conf.d/90-bootfleet-root.conf", "systemd/network/00-bootfleet-root.link"} {
		if _, ok := files[f]; ok {
			t.Errorf("without a MAC there is no %s", f)
		}
	}
}
