package telemetry

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// testFleet is several servers' Recorders on one clock the test moves.
// The clock is atomic: a History's Run reads it while the test moves it.
type testFleet struct {
	ns   atomic.Int64
	recs map[string]*Recorder
}

func (tf *testFleet) time() time.Time     { return time.Unix(0, tf.ns.Load()).UTC() }
func (tf *testFleet) add(d time.Duration) { tf.ns.Add(int64(d)) }

func newTestFleet(cfg Config, names ...string) *testFleet {
	tf := &testFleet{recs: map[string]*Recorder{}}
	tf.ns.Store(t0.UnixNano())
	for _, n := range names {
		c := cfg
		c.Server, c.Now = n, func() time.Time { return tf.time() }
		c.LookupIP = func(net.IP) net.HardwareAddr { return nil }
		tf.recs[n] = New(c)
	}
	return tf
}

// A fleetStep is one thing a machine does with one server.
type fleetStep func(tf *testFleet)

func wait(d time.Duration) fleetStep { return func(tf *testFleet) { tf.add(d) } }

// heard: server s heard the machine's DISCOVER and REQUEST, 1 s apart.
func heard(s string, mac net.HardwareAddr, c pxe.Client) fleetStep {
	return func(tf *testFleet) {
		tf.recs[s].DHCPPacket(mac, dhcpv4.MessageTypeDiscover, c)
		tf.add(time.Second)
		tf.recs[s].DHCPPacket(mac, dhcpv4.MessageTypeRequest, c)
	}
}

// answered: server s sent the machine an ACK.
func answered(s string, mac net.HardwareAddr) fleetStep {
	return func(tf *testFleet) {
		tf.recs[s].DHCPReply(dhcp.Reply{MAC: mac, Type: dhcpv4.MessageTypeAck, Request: dhcpv4.MessageTypeRequest})
	}
}

// sent: server s sent the machine a file over 2 s.
func sent(s string, mac net.HardwareAddr, file string) fleetStep {
	return func(tf *testFleet) {
		tf.recs[s].HTTPTransferDone(httpboot.FileTransfer{MAC: mac, Remote: "10.0.0.9:40000", Name: file,
			Bytes: 1e6, Start: tf.time(), Duration: 2 * time.Second})
		tf.add(2 * time.Second)
	}
}

// reported: the machine reported milestone name to server s.
func reported(s string, mac net.HardwareAddr, name string) fleetStep {
	return func(tf *testFleet) { tf.recs[s].Milestone(mac, name, "10.0.0.9:40000") }
}

func doneOn(s string, mac net.HardwareAddr) fleetStep {
	return func(tf *testFleet) { tf.recs[s].Complete(mac) }
}

// served: server s ends an NBD session of the machine that lasted d.
func served(s string, mac net.HardwareAddr, d time.Duration) fleetStep {
	return func(tf *testFleet) {
		tf.recs[s].NBDSession(mac, nbd.SessionStats{Export: "root", Duration: d})
	}
}

// records are every server's records, as their memory holds them.
func (tf *testFleet) records() []Boot {
	var out []Boot
	for _, r := range tf.recs {
		out = append(out, r.Boots(Filter{})...)
	}
	return out
}

// describe is what the merge tests compare: per boot, newest first, its
// state, its server, the servers merged, its events and who took its
// DoneURL.
func describe(bs []Boot) string {
	var out []string
	for _, b := range bs {
		d := fmt.Sprintf("%s by=%s servers=%s dhcp=%d files=%d nbd=%d done=%s", b.State, b.Server,
			strings.Join(b.Servers, ","), len(b.DHCP), len(b.Transfers), len(b.NBD), b.DoneServer)
		if len(b.Milestones) > 0 {
			d += fmt.Sprintf(" milestones=%d", len(b.Milestones))
		}
		out = append(out, d)
	}
	return strings.Join(out, " | ")
}

// TestMerge: the records several servers keep of a machine's boots read
// as one record per boot.
func TestMerge(t *testing.T) {
	tests := []struct {
		name  string
		steps []fleetStep
		want  string // describe of the merged boots, newest first
	}{
		{"one server: its record as it is", []fleetStep{
			heard("a", macA, uefi), sent("a", macA, "vmlinuz"), doneOn("a", macA)},
			"complete by=a servers= dhcp=2 files=1 nbd=0 done=a"},
		{"dhcp on a, files on b, done on a", []fleetStep{
			heard("a", macA, ipxe), sent("b", macA, "vmlinuz"), sent("b", macA, "initrd"), wait(10 * time.Second), doneOn("a", macA)},
			"complete by=a servers=a,b dhcp=2 files=2 nbd=0 done=a"},
		{"done on another server than dhcp", []fleetStep{
			heard("a", macA, ipxe), sent("b", macA, "vmlinuz"), wait(10 * time.Second), doneOn("b", macA)},
			"complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=b"},
		{"not overlapping: a file an hour after the boot is no part of it", []fleetStep{
			heard("a", macA, ipxe), doneOn("a", macA), wait(time.Hour), sent("b", macA, "late")},
			"booting by=b servers= dhcp=0 files=1 nbd=0 done= | complete by=a servers= dhcp=2 files=0 nbd=0 done=a"},
		{"same machine, two boots in a row", []fleetStep{
			heard("a", macA, ipxe), sent("b", macA, "vmlinuz"), doneOn("a", macA), wait(time.Minute),
			heard("a", macA, ipxe), sent("b", macA, "vmlinuz"), sent("b", macA, "initrd"), doneOn("a", macA)},
			"complete by=a servers=a,b dhcp=2 files=2 nbd=0 done=a | complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=a"},
		{"two machines at once", []fleetStep{
			heard("a", macA, ipxe), heard("a", macB, ipxe), sent("b", macB, "vmlinuz"), sent("b", macA, "vmlinuz"),
			doneOn("b", macA), doneOn("b", macB)},
			"complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=b | complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=b"},
		{"three servers, the root on c outliving the boot", []fleetStep{
			heard("a", macA, ipxe), sent("b", macA, "vmlinuz"), sent("c", macA, "initrd"), wait(5 * time.Second),
			doneOn("b", macA), wait(time.Hour), served("c", macA, time.Hour)},
			"complete by=a servers=a,b,c dhcp=2 files=2 nbd=1 done=b"},
		{"a milestone from the running OS, long after done, on another server", []fleetStep{
			heard("a", macA, ipxe), sent("a", macA, "vmlinuz"), doneOn("a", macA), wait(3 * time.Hour),
			reported("b", macA, "nbd-reconnected-800ms")},
			"complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=a milestones=1"},
		{"but not on the machine's next boot", []fleetStep{
			heard("a", macA, ipxe), doneOn("a", macA), wait(time.Hour), heard("a", macA, ipxe), reported("b", macA, "kernel-up")},
			"booting by=a servers=a,b dhcp=2 files=0 nbd=0 done= milestones=1 | complete by=a servers= dhcp=2 files=0 nbd=0 done=a"},
		{"every server hears the DHCP, a answers", []fleetStep{
			func(tf *testFleet) {
				for _, s := range []string{"a", "b", "c"} {
					tf.recs[s].DHCPPacket(macA, dhcpv4.MessageTypeDiscover, ipxe)
				}
			}, answered("a", macA), sent("b", macA, "vmlinuz"), doneOn("c", macA)},
			"complete by=a servers=a,b,c dhcp=2 files=1 nbd=0 done=c"},
		{"failover: a answers the firmware, b iPXE", []fleetStep{
			heard("a", macA, uefi), wait(3 * time.Second), heard("b", macA, ipxe), sent("b", macA, "vmlinuz"), doneOn("b", macA)},
			"complete by=a servers=a,b dhcp=4 files=1 nbd=0 done=b"},
		{"a restart that another server answers is a new boot", []fleetStep{
			heard("a", macA, uefi), heard("a", macA, ipxe), wait(time.Minute), heard("b", macA, uefi), doneOn("b", macA)},
			"complete by=b servers= dhcp=2 files=0 nbd=0 done=b | booting by=a servers= dhcp=4 files=0 nbd=0 done="},
		{"dhcp outside the fleet: the partial records read as one boot", []fleetStep{
			sent("a", macA, "vmlinuz"), sent("b", macA, "initrd"), doneOn("a", macA)},
			"complete by=a servers=a,b dhcp=0 files=2 nbd=0 done=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFleet(Config{}, "a", "b", "c")
			for _, s := range tt.steps {
				s(tf)
			}
			got := mergeBoots(tf.records(), time.Hour)
			if d := describe(got); d != tt.want {
				t.Fatalf("merged:\n got %s\nwant %s", d, tt.want)
			}
			for _, b := range got {
				for i := 1; i < len(b.DHCP); i++ {
					if b.DHCP[i].Time.Before(b.DHCP[i-1].Time) {
						t.Errorf("boot %s: DHCP out of order: %+v", b.ID, b.DHCP)
					}
				}
				if first := firstEvent(b); b.Start.After(first) {
					t.Errorf("boot %s starts at %v, after its first event at %v", b.ID, b.Start, first)
				}
				if len(b.Parts) > 0 && !slices.Contains(b.Parts, b.ID) {
					t.Errorf("boot %s: parts %v, want its own ID among them", b.ID, b.Parts)
				}
			}
		})
	}
}

// TestMergedTimeline: the merged boot's phases come from every server, in
// time order, each naming its server, and its total runs from the first
// DHCP packet on one server to the DoneURL on another.
func TestMergedTimeline(t *testing.T) {
	tf := newTestFleet(Config{}, "a", "b")
	for _, s := range []fleetStep{heard("a", macA, ipxe), wait(time.Second), sent("b", macA, "vmlinuz"),
		sent("a", macA, "initrd"), wait(5 * time.Second), doneOn("b", macA)} {
		s(tf)
	}
	got := mergeBoots(tf.records(), time.Hour)
	if len(got) != 1 {
		t.Fatalf("%d boots, want 1: %s", len(got), describe(got))
	}
	b := got[0]
	b.derive()
	var phases []string
	for _, p := range b.Phases {
		phases = append(phases, p.Name+"@"+p.Server)
	}
	want := "dhcp ipxe-uefi-x64@a,http vmlinuz@b,http initrd@a,boot complete@b"
	if s := strings.Join(phases, ","); s != want {
		t.Errorf("phases %s, want %s", s, want)
	}
	if !b.Start.Equal(t0) || b.Summary.TotalSeconds != 11 || b.Summary.DownloadBytes != 2e6 {
		t.Errorf("start %v, total %v s, %d bytes; want %v, 11 s, 2000000", b.Start, b.Summary.TotalSeconds, b.Summary.DownloadBytes, t0)
	}
	if !strings.HasPrefix(b.ID, bootID(macA, t0)+"-") {
		t.Errorf("id %s, want a's ID: %s and its server tag", b.ID, bootID(macA, t0))
	}
}

func TestParseBootID(t *testing.T) {
	tests := []struct {
		id  string
		ok  bool
		mac string
	}{
		{"52540000000a-1772352000000", true, "52:54:00:00:00:0a"},
		{"52540000000a-1772352000000-1x2y3z", true, "52:54:00:00:00:0a"},
		{"nope", false, ""},
		{"52540000000a", false, ""},
		{"5254zz00000a-1772352000000", false, ""},
		{"52540000000a-soon", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			mac, at, ok := parseBootID(tt.id)
			if ok != tt.ok || ok && (mac.String() != tt.mac || !at.Equal(t0)) {
				t.Fatalf("parseBootID(%q) = %v, %v, %v; want %v, %s, %v", tt.id, mac, at, ok, tt.ok, tt.mac, t0)
			}
		})
	}
}
