package rootarg

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Target
		wantErr string
	}{
		{in: "nbd:10.0.0.1:10809:abc", want: Target{Host: "10.0.0.1", Port: 10809, Export: "abc"}},
		{in: "nbd:server:1:a:b:c", want: Target{Host: "server", Port: 1, Export: "a:b:c"}},
		{in: "nbd:[fd00::1]:10809:x", want: Target{Host: "fd00::1", Port: 10809, Export: "x"}},
		{in: "nbd:10.0.0.1:10809,10.0.0.2:10810:abc", want: Target{Host: "10.0.0.1", Port: 10809, Export: "abc",
			Fallbacks: []Server{{"10.0.0.2", 10810}}}},
		{in: "nbd:a:1,[fd00::2]:2,c:3:x,y:z", want: Target{Host: "a", Port: 1, Export: "x,y:z",
			Fallbacks: []Server{{"fd00::2", 2}, {"c", 3}}}},
		{in: "nbd:a:1,:x", wantErr: "empty host"},
		{in: "nbd:a:1,b:x:e", wantErr: "port \"x\" is not"},
		{in: "nbd:a:1,b:2", wantErr: "no export name"},
		{in: "nbd:[a,b]:1:x", wantErr: "not an IPv6 address"},
		{in: "nbd:a b:1:x", wantErr: "not an address"},
		{in: "nbd:" + strings.Repeat("a:1,", MaxServers) + "a:1:x", wantErr: "more than 16 servers"},
		{in: "10.0.0.1:10809:abc", wantErr: "no nbd: scheme"},
		{in: "nbd:10.0.0.1", wantErr: "no port"},
		{in: "nbd:10.0.0.1:10809", wantErr: "no export name"},
		{in: "nbd:10.0.0.1:10809:", wantErr: "empty export name"},
		{in: "nbd::10809:x", wantErr: "empty host"},
		{in: "nbd:h:0:x", wantErr: "not 1..65535"},
		{in: "nbd:h:70000:x", wantErr: "not 1..65535"},
		{in: "nbd:h:port:x", wantErr: "not 1..65535"},
		{in: "nbd:[fd00::1:10809:x", wantErr: "unterminated"},
		{in: "nbd:[server]:10809:x", wantErr: "[server] is not an IPv6 address"},
		{in: "nbd:[10.0.0.1]:10809:x", wantErr: "is not an IPv6 address"},
		{in: "nbd:[::ffff:10.0.0.1]:10809:x", wantErr: "is not an IPv6 address"},
		{in: "nbd:[fe80::1%eth0]:10809:x", want: Target{Host: "fe80::1%eth0", Port: 10809, Export: "x"}},
		{in: "nbd:[fd00::1]:10809,10.0.0.2:10809,[fd00::3]:1:x", want: Target{Host: "fd00::1", Port: 10809, Export: "x",
			Fallbacks: []Server{{"10.0.0.2", 10809}, {"fd00::3", 1}}}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestTargetStringHidesSecret(t *testing.T) {
	tg := Target{Host: "10.0.0.1", Port: 10809, Export: "s3cret"}
	if s := tg.String(); strings.Contains(s, "s3cret") || s != "nbd:10.0.0.1:10809:<export>" {
		t.Errorf("String() = %q; want the address without the export name", s)
	}
	if a := (Target{Host: "fd00::1", Port: 1, Export: "x"}).Addr(); a != "[fd00::1]:1" {
		t.Errorf("Addr() = %q, want [fd00::1]:1", a)
	}
	tg.Fallbacks = []Server{{"fd00::2", 2}}
	if s := tg.String(); s != "nbd:10.0.0.1:10809,[fd00::2]:2:<export>" {
		t.Errorf("String() with a fallback = %q, want every server and no export name", s)
	}
	if a := tg.Arg(); a != "nbd:10.0.0.1:10809,[fd00::2]:2:s3cret" {
		t.Errorf("Arg() = %q, want the bootfleet.root= value with the secret", a)
	}
}

// TestServerFamily: a server's family is known from its address alone; a
// host name has none until it is resolved.
func TestServerFamily(t *testing.T) {
	for _, tc := range []struct {
		host       string
		ipv4, ipv6 bool
	}{
		{"10.0.0.1", true, false},
		{"fd00::1", false, true},
		{"fe80::1%eth0", false, true},
		{"::ffff:10.0.0.1", true, false},
		{"server.lab", false, false},
	} {
		s := Server{Host: tc.host, Port: 1}
		if s.IPv4() != tc.ipv4 || s.IPv6() != tc.ipv6 {
			t.Errorf("%q: IPv4() %v IPv6() %v, want %v %v", tc.host, s.IPv4(), s.IPv6(), tc.ipv4, tc.ipv6)
		}
	}
}

// TestFromCmdline: the last bootfleet.root= wins, other parameters are
// ignored, and a command line without one (or with an empty one last)
// says ErrNoRoot.
func TestFromCmdline(t *testing.T) {
	got, err := FromCmdline("console=ttyS0 bootfleet.root=nbd:a:1:x bootfleet.rootfstype=xfs bootfleet.root=nbd:b:2:y quiet")
	if want := (Target{Host: "b", Port: 2, Export: "y"}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("FromCmdline = %+v, %v; want %+v from the last bootfleet.root=", got, err, want)
	}
	for _, cmdline := range []string{"", "console=ttyS0 root=/dev/sda1", "bootfleet.root=nbd:a:1:x bootfleet.root="} {
		if _, err := FromCmdline(cmdline); !errors.Is(err, ErrNoRoot) {
			t.Errorf("FromCmdline(%q) = %v, want ErrNoRoot", cmdline, err)
		}
	}
	if _, err := FromCmdline("bootfleet.root=nfs:x"); err == nil || !strings.Contains(err.Error(), "no nbd: scheme") {
		t.Errorf("FromCmdline with an NFS root = %v, want the scheme refused", err)
	}
}

// FuzzParse: any value either parses into a target the agent can dial
// (every server with a host and a port in range, an export, at most
// MaxServers) that reads back the same from its own Arg, or returns an
// error; never a panic. The seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("nbd:10.0.0.1:10809,[fd00::2]:10809,c:1:b-x,y:z")
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := Parse(s)
		if err != nil {
			return
		}
		servers := tg.Servers()
		if tg.Export == "" || len(servers) > MaxServers {
			t.Fatalf("Parse(%q) accepted %+v", s, tg)
		}
		for _, sv := range servers {
			if sv.Host == "" || strings.ContainsAny(sv.Host, ",[]") || sv.Port < 1 || sv.Port > 65535 {
				t.Fatalf("Parse(%q) accepted server %+v", s, sv)
			}
			// A host with a colon can only have come in brackets, which
			// hold IPv6 addresses only.
			if strings.Contains(sv.Host, ":") != sv.IPv6() {
				t.Fatalf("Parse(%q) accepted server %+v: a host with a colon must be an IPv6 address", s, sv)
			}
		}
		back, err := Parse(tg.Arg())
		if err != nil || !reflect.DeepEqual(back, tg) {
			t.Fatalf("%+v does not survive its own form: %+v, %v", tg, back, err)
		}
	})
}
