package agent

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

func TestParseTarget(t *testing.T) {
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
		{in: "nbd:[a,b]:1:x", wantErr: "not an address"},
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
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTarget(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTarget(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
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

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		check   func(Options) bool
		wantErr string
	}{
		{name: "defaults", in: "console=ttyS0 bootfleet.root=nbd:1.2.3.4:10809:e quiet", check: func(o Options) bool {
			return reflect.DeepEqual(o.Root, Target{Host: "1.2.3.4", Port: 10809, Export: "e"}) && o.FSType == "" && o.RootPart == (diskprobe.Choice{}) && o.Init == "/sbin/init" &&
				o.DeadConn == DefaultDeadConnTimeout && o.IOTimeout == DefaultIOTimeout && !o.ReadOnly && !o.Shell && o.DeviceName == "nbd0"
		}},
		{name: "last wins", in: "bootfleet.root=nbd:a:1:x bootfleet.root=nbd:b:2:y", check: func(o Options) bool {
			return reflect.DeepEqual(o.Root, Target{Host: "b", Port: 2, Export: "y"})
		}},
		{name: "overrides", in: "bootfleet.root=nbd:a:1:x bootfleet.rootfstype=xfs bootfleet.rootflags=noatime bootfleet.ro bootfleet.init=/bin/sh bootfleet.nbd.dead=5 bootfleet.nbd.timeout=7 bootfleet.shell=1", check: func(o Options) bool {
			return o.IOTimeout == 7*time.Second && o.FSType == "xfs" && o.RootFlags == "noatime" && o.ReadOnly && o.Init == "/bin/sh" && o.DeadConn == 5*time.Second && o.Shell
		}},
		{name: "root partition by number", in: "bootfleet.root=nbd:a:1:x bootfleet.root.part=3", check: func(o Options) bool { return o.RootPart.Part == 3 }},
		{name: "root partition by PARTUUID", in: "bootfleet.root=nbd:a:1:x bootfleet.root.part=PARTUUID=1234abcd-02", check: func(o Options) bool {
			return o.RootPart.PartUUID == "1234abcd-02"
		}},
		{name: "root partition by label", in: "bootfleet.root=nbd:a:1:x bootfleet.root.part=LABEL=labroot", check: func(o Options) bool { return o.RootPart.Label == "labroot" }},
		{name: "bad root partition", in: "bootfleet.root=nbd:a:1:x bootfleet.root.part=UUID=x", wantErr: "bootfleet.root.part"},
		{name: "ro=0", in: "bootfleet.root=nbd:a:1:x bootfleet.ro=0", check: func(o Options) bool { return !o.ReadOnly }},
		{name: "milestones", in: "bootfleet.root=nbd:a:1:x bootfleet.milestones=http://10.0.0.1:8080/milestone/52-54-00-00-00-01/", check: func(o Options) bool {
			return o.Milestones == "http://10.0.0.1:8080/milestone/52-54-00-00-00-01"
		}},
		{name: "bad milestones", in: "bootfleet.root=nbd:a:1:x bootfleet.milestones=ftp://x", wantErr: "bootfleet.milestones"},
		{name: "identity", in: "bootfleet.root=nbd:a:1:x bootfleet.identity=http://10.0.0.1:8080/identity", check: func(o Options) bool {
			return o.Identity == "http://10.0.0.1:8080/identity"
		}},
		{name: "bad identity", in: "bootfleet.root=nbd:a:1:x bootfleet.identity=https://x", wantErr: "bootfleet.identity"},
		{name: "no root", in: "console=ttyS0 root=/dev/sda1", wantErr: "no bootfleet.root="},
		{name: "bad root", in: "bootfleet.root=nfs:x", wantErr: "no nbd: scheme"},
		{name: "bad dead", in: "bootfleet.root=nbd:a:1:x bootfleet.nbd.dead=-1", wantErr: "bootfleet.nbd.dead"},
		{name: "zero timeout", in: "bootfleet.root=nbd:a:1:x bootfleet.nbd.timeout=0", wantErr: "bootfleet.nbd.timeout"},
		{name: "relative init", in: "bootfleet.root=nbd:a:1:x bootfleet.init=sbin/init", wantErr: "absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseCmdline(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseCmdline(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(o) {
				t.Fatalf("ParseCmdline(%q) = %+v, %v", tc.in, o, err)
			}
		})
	}
	if _, err := ParseCmdline(""); !errors.Is(err, ErrNoRoot) {
		t.Errorf("empty cmdline: got %v, want ErrNoRoot", err)
	}
}
