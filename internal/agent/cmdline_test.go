package agent

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
	"github.com/bootfleet/bootfleet/internal/rootarg"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		check   func(Options) bool
		wantErr string
	}{
		{name: "defaults", in: "console=ttyS0 bootfleet.root=nbd:1.2.3.4:10809:e quiet", check: func(o Options) bool {
			return reflect.DeepEqual(o.Root, rootarg.Target{Host: "1.2.3.4", Port: 10809, Export: "e"}) && o.FSType == "" && o.RootPart == (diskprobe.Choice{}) && o.Init == "/sbin/init" &&
				o.DeadConn == DefaultDeadConnTimeout && o.IOTimeout == DefaultIOTimeout && !o.ReadOnly && !o.Shell && o.DeviceName == "nbd0"
		}},
		{name: "last wins", in: "bootfleet.root=nbd:a:1:x bootfleet.root=nbd:b:2:y", check: func(o Options) bool {
			return reflect.DeepEqual(o.Root, rootarg.Target{Host: "b", Port: 2, Export: "y"})
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
		{name: "direct path by default", in: "bootfleet.root=nbd:a:1:x", check: func(o Options) bool { return !o.Proxy && !o.HasMulticast && !o.ReadCacheSet }},
		{name: "multicast turns the proxy on", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast=239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef", check: func(o Options) bool {
			return o.Proxy && o.HasMulticast && o.Multicast.Group.Port() == 10810
		}},
		{name: "proxy off despite multicast", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast=239.1.2.3:10810,10.0.0.1:10810,0123456789abcdef bootfleet.proxy=0", check: func(o Options) bool { return !o.Proxy }},
		{name: "proxy without multicast", in: "bootfleet.root=nbd:a:1:x bootfleet.proxy=1 bootfleet.readcache=256M", check: func(o Options) bool {
			return o.Proxy && o.ReadCacheBytes == 256<<20 && o.ReadCacheSet
		}},
		{name: "no read cache", in: "bootfleet.root=nbd:a:1:x bootfleet.proxy=1 bootfleet.readcache=0", check: func(o Options) bool {
			return o.ReadCacheSet && o.ReadCacheBytes == 0 && o.ReadCachePercent == 0
		}},
		{name: "read cache share", in: "bootfleet.root=nbd:a:1:x bootfleet.readcache=15%", check: func(o Options) bool { return o.ReadCachePercent == 15 }},
		{name: "overlay blocks", in: "bootfleet.root=nbd:a:1:x bootfleet.overlay.blocks=http://10.0.0.1:8080/nbd/overlay-blocks", check: func(o Options) bool {
			return o.OverlayBlocks == "http://10.0.0.1:8080/nbd/overlay-blocks"
		}},
		{name: "read order", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast.order=http://10.0.0.1:8080/nbd/read-order/ab bootfleet.mcast.ahead=8", check: func(o Options) bool {
			return o.ReadOrder == "http://10.0.0.1:8080/nbd/read-order/ab" && o.ReadAhead == 8
		}},
		{name: "read-ahead default", in: "bootfleet.root=nbd:a:1:x", check: func(o Options) bool { return o.ReadAhead == DefaultReadAhead && o.ReadOrder == "" }},
		{name: "bad read-ahead", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast.ahead=65", wantErr: "bootfleet.mcast.ahead"},
		{name: "bad read order", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast.order=/x", wantErr: "bootfleet.mcast.order"},
		{name: "bad proxy", in: "bootfleet.root=nbd:a:1:x bootfleet.proxy=yes", wantErr: "bootfleet.proxy"},
		{name: "bad read cache", in: "bootfleet.root=nbd:a:1:x bootfleet.readcache=1K", wantErr: "bootfleet.readcache"},
		{name: "bad multicast", in: "bootfleet.root=nbd:a:1:x bootfleet.mcast=239.1.2.3", wantErr: "bootfleet.mcast"},
		{name: "bad overlay blocks", in: "bootfleet.root=nbd:a:1:x bootfleet.overlay.blocks=/x", wantErr: "bootfleet.overlay.blocks"},
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
	if _, err := ParseCmdline(""); !errors.Is(err, rootarg.ErrNoRoot) {
		t.Errorf("empty cmdline: got %v, want rootarg.ErrNoRoot", err)
	}
}

func TestRootIOQuery(t *testing.T) {
	got := RootIOQuery(rootproxy.Stats{MulticastBytes: 1, UnicastBytes: 2, HitBytes: 3, MissBytes: 4, WrittenBytes: 5, Fallbacks: 6, Lost: 7, Overflow: 11, Repairs: 8, AheadChunks: 9, AheadUsed: 10, Multicast: "silent"})
	if want := "ahead=9&ahead_used=10&fallbacks=6&group=silent&hits=3&lost=7&misses=4&multicast=1&overflow=11&repairs=8&unicast=2&written=5"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
