package telemetry

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/pxe"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

var (
	t0      = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	macA, _ = net.ParseMAC("52:54:00:00:00:0a")
	macB, _ = net.ParseMAC("52:54:00:00:00:0b")
	uefi    = pxe.Client{PXE: true, Arch: pxe.ArchEFIx64, HasArch: true}
	ipxe    = pxe.Client{PXE: true, IPXE: true, Arch: pxe.ArchEFIx64, HasArch: true}
	linux   = pxe.Client{}
)

// fake drives a Recorder with a clock the test moves.
type fake struct {
	t   *testing.T
	now time.Time
	r   *Recorder
	arp map[string]net.HardwareAddr
}

func newFake(t *testing.T, cfg Config) *fake {
	f := &fake{t: t, now: t0, arp: map[string]net.HardwareAddr{}}
	cfg.Now = func() time.Time { return f.now }
	cfg.LookupIP = func(ip net.IP) net.HardwareAddr { return f.arp[ip.String()] }
	f.r = New(cfg)
	return f
}

func (f *fake) step(d time.Duration) { f.now = f.now.Add(d) }

func (f *fake) dhcp(mac net.HardwareAddr, t dhcpv4.MessageType, c pxe.Client) {
	f.r.DHCPPacket(mac, t, c)
}

// dora is DISCOVER, 1 s, REQUEST, as firmware does.
func (f *fake) dora(mac net.HardwareAddr, c pxe.Client) {
	f.dhcp(mac, dhcpv4.MessageTypeDiscover, c)
	f.step(time.Second)
	f.dhcp(mac, dhcpv4.MessageTypeRequest, c)
}

func (f *fake) tftp(ip, file string, bytes int64, d time.Duration, probe bool) {
	f.r.TFTPTransfer(tftp.TransferStats{Remote: &net.UDPAddr{IP: net.ParseIP(ip), Port: 2000}, Filename: file,
		Bytes: bytes, Start: f.now, Duration: d, BlockSize: 1456, WindowSize: 16, Retransmits: 2, SizeProbe: probe,
		Err: map[bool]error{true: errors.New("client aborted")}[probe]})
	f.step(d)
}

func (f *fake) http(mac net.HardwareAddr, ip, file string, bytes int64, d time.Duration) {
	f.r.HTTPTransferStarted()
	f.r.HTTPTransferDone(httpboot.FileTransfer{MAC: mac, Remote: ip + ":40000", Name: file, Bytes: bytes, Start: f.now, Duration: d})
	f.step(d)
}

func (f *fake) done(mac net.HardwareAddr) (time.Duration, bool) {
	return f.r.Complete(mac)
}

// uefiBoot is a whole UEFI PXE boot of 40 s.
func (f *fake) uefiBoot(mac net.HardwareAddr, ip string) {
	f.arp[ip] = mac
	f.dora(mac, uefi)                                        // 0-1
	f.step(time.Second)                                      // 2
	f.tftp(ip, "ipxe.efi", 0, 10*time.Millisecond, true)     // probe
	f.tftp(ip, "ipxe.efi", 1_000_000, time.Second, false)    // 2.01-3.01
	f.dora(mac, ipxe)                                        // 3.01-4.01
	f.r.Milestone(mac, "ipxe-script", ip+":40000")           // 4.01
	f.http(mac, ip, "vmlinuz", 8_000_000, 2*time.Second)     // 4.01-6.01
	f.http(mac, ip, "initrd.img", 20_000_000, 4*time.Second) // 6.01-10.01
	f.step(20 * time.Second)
	f.dora(mac, linux) // 30.01-31.01
	f.step(8990 * time.Millisecond)
	f.done(mac) // 40
}

func TestUEFIBootRecord(t *testing.T) {
	f := newFake(t, Config{})
	f.uefiBoot(macA, "10.0.0.10")
	bs := f.r.Boots(Filter{})
	if len(bs) != 1 {
		t.Fatalf("got %d boots, want 1: %+v", len(bs), bs)
	}
	b := bs[0]
	if b.State != StateComplete || b.MAC != macA.String() || !b.Start.Equal(t0) {
		t.Fatalf("boot %+v: want complete, %s, start %v", b, macA, t0)
	}
	want := Summary{DHCPSeconds: 3, DownloadSeconds: 7, DownloadBytes: 29_000_000, DownloadMBps: 4.14, TotalSeconds: 40}
	if b.Summary != want {
		t.Errorf("summary %+v, want %+v", b.Summary, want)
	}
	var names []string
	for _, p := range b.Phases {
		names = append(names, p.Name)
	}
	wantNames := "dhcp uefi-x64,tftp ipxe.efi,dhcp ipxe-uefi-x64,milestone ipxe-script,http vmlinuz,http initrd.img,dhcp os,boot complete"
	if strings.Join(names, ",") != wantNames {
		t.Errorf("phases %v, want %s", names, wantNames)
	}
	if tr := b.Transfers[0]; tr.Proto != "tftp" || tr.BlockSize != 1456 || tr.WindowSize != 16 || tr.Retransmits != 2 || tr.MBps != 1 {
		t.Errorf("tftp transfer %+v: want blksize 1456, windowsize 16, 2 retransmits, 1 MB/s", tr)
	}
	if got, ok := f.r.Boot(b.ID); !ok || got.ID != b.ID || len(got.Phases) != len(b.Phases) {
		t.Errorf("Boot(%q) = %v, %v", b.ID, got.ID, ok)
	}
	if b.ID != "52540000000a-"+"1772352000000" {
		t.Errorf("id %q", b.ID)
	}
}

// TestBootBoundaries: which DHCP packets start, join or are left out of a boot.
func TestBootBoundaries(t *testing.T) {
	type step func(f *fake)
	dhcp := func(mac net.HardwareAddr, mt dhcpv4.MessageType, c pxe.Client) step {
		return func(f *fake) { f.dhcp(mac, mt, c) }
	}
	wait := func(d time.Duration) step { return func(f *fake) { f.step(d) } }
	done := func(mac net.HardwareAddr) step { return func(f *fake) { f.done(mac) } }
	httpGet := func(mac net.HardwareAddr) step {
		return func(f *fake) { f.http(mac, "10.0.0.9", "k", 10, time.Second) }
	}
	for _, tc := range []struct {
		name   string
		steps  []step
		states string // newest first
	}{
		{"os renewal without a boot is ignored", []step{dhcp(macA, dhcpv4.MessageTypeRequest, linux)}, ""},
		{"os discover does not start a boot", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, linux)}, ""},
		{"firmware then ipxe is one boot", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, uefi), wait(time.Second),
			dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), done(macA)}, "complete"},
		{"ipxe discover after downloads is a restart", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe),
			httpGet(macA), dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe)}, "booting,failed"},
		{"firmware discover after ipxe is a restart", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, uefi),
			dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), dhcp(macA, dhcpv4.MessageTypeDiscover, uefi)}, "booting,failed"},
		{"stale boot fails and the next starts", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), wait(2 * time.Hour),
			dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe)}, "booting,failed"},
		{"stale boot reads as failed", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), wait(2 * time.Hour)}, "failed"},
		{"second DoneURL is ignored", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), done(macA), done(macA)}, "complete"},
		{"renewal after boot complete is ignored", []step{dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe), done(macA),
			dhcp(macA, dhcpv4.MessageTypeRequest, linux)}, "complete"},
		{"download without a boot is unattributed", []step{httpGet(macA)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, Config{})
			for _, s := range tc.steps {
				s(f)
			}
			var states []string
			for _, b := range f.r.Boots(Filter{}) {
				states = append(states, b.State)
			}
			if got := strings.Join(states, ","); got != tc.states {
				t.Errorf("states %q, want %q", got, tc.states)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	f := newFake(t, Config{PerMachine: 3, MaxBoots: 5})
	for i := range 4 {
		for _, mac := range []net.HardwareAddr{macA, macB} {
			f.dhcp(mac, dhcpv4.MessageTypeDiscover, ipxe)
			f.step(time.Second)
			f.done(mac)
		}
		_ = i
	}
	all := f.r.Boots(Filter{})
	if len(all) != 5 {
		t.Fatalf("kept %d boots, want MaxBoots 5", len(all))
	}
	a := f.r.Boots(Filter{MAC: macA})
	b := f.r.Boots(Filter{MAC: macB})
	if len(a)+len(b) != 5 || len(a) > 3 || len(b) > 3 {
		t.Fatalf("per machine %d + %d, want 5 in all, at most 3 each", len(a), len(b))
	}
	// Newest first, and the evicted are gone from the ID index too.
	if !all[0].Start.After(all[4].Start) {
		t.Errorf("not newest first: %v .. %v", all[0].Start, all[4].Start)
	}
	if _, ok := f.r.Boot(bootID(macA, t0)); ok {
		t.Error("the first boot was evicted but Boot still finds it")
	}
	if got := f.r.Boots(Filter{Limit: 2}); len(got) != 2 {
		t.Errorf("limit 2 gave %d", len(got))
	}
	if got := f.r.Boots(Filter{Since: f.now.Add(-2 * time.Second)}); len(got) != 2 {
		t.Errorf("since the last 2 s gave %d boots, want 2", len(got))
	}
	// Many more boots keep memory bounded: the queue is compacted.
	for range 1000 {
		f.dhcp(macA, dhcpv4.MessageTypeDiscover, ipxe)
		f.step(time.Second)
		f.done(macA)
	}
	if n := len(f.r.order); n > 200 {
		t.Errorf("queue holds %d entries for 5 boots; it is never compacted", n)
	}
}

// TestTFTPAttribution: TFTP only knows the address. It is tied to a MAC
// through the neighbour table or an earlier HTTP ?mac= request.
func TestTFTPAttribution(t *testing.T) {
	f := newFake(t, Config{})
	f.dhcp(macA, dhcpv4.MessageTypeDiscover, uefi)
	f.tftp("10.0.0.20", "unknown-client", 5, time.Second, false)
	f.arp["10.0.0.20"] = macA
	f.tftp("10.0.0.20", "ipxe.efi", 5, time.Second, false)
	delete(f.arp, "10.0.0.20") // learned now
	f.tftp("10.0.0.20", "again", 5, time.Second, false)
	f.http(macA, "10.0.0.21", "vmlinuz", 5, time.Second)
	f.tftp("10.0.0.21", "learned-from-http", 5, time.Second, false)
	b := f.r.Boots(Filter{})[0]
	var got []string
	for _, tr := range b.Transfers {
		got = append(got, tr.Name)
	}
	if s := strings.Join(got, ","); s != "ipxe.efi,again,vmlinuz,learned-from-http" {
		t.Errorf("attributed %s", s)
	}
}

func TestParseARP(t *testing.T) {
	const table = `IP address       HW type     Flags       HW address            Mask     Device
10.213.0.100     0x1         0x2         52:54:00:e2:e0:02     *        br0
10.213.0.101     0x1         0x0         00:00:00:00:00:00     *        br0
`
	for _, tc := range []struct{ ip, want string }{
		{"10.213.0.100", "52:54:00:e2:e0:02"}, {"10.213.0.101", ""}, {"10.213.0.1", ""},
	} {
		got := parseARP(bufio.NewScanner(strings.NewReader(table)), tc.ip)
		if (got == nil && tc.want != "") || (got != nil && got.String() != tc.want) {
			t.Errorf("%s: got %v, want %q", tc.ip, got, tc.want)
		}
	}
}

// TestNBDSessionJoinsLatestBoot: a diskless root's session ends at
// shutdown, after boot complete, and still lands on that boot's record.
func TestNBDSessionJoinsLatestBoot(t *testing.T) {
	f := newFake(t, Config{})
	f.uefiBoot(macA, "10.0.0.10")
	f.r.NBDSession(macA, nbd.SessionStats{Export: "m-52-54-00-00-00-0a-abc", BytesRead: 8 << 20, BytesWritten: 4096, Ops: 130, Duration: time.Minute})
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) == 0 {
		t.Fatal("no boot recorded")
	}
	got := bs[0].NBD
	if len(got) != 1 || got[0].BytesRead != 8<<20 || got[0].BytesWritten != 4096 || got[0].Ops != 130 || got[0].Seconds != 60 {
		t.Fatalf("NBD sessions on the latest boot = %+v", got)
	}
	f.r.NBDSession(macB, nbd.SessionStats{Export: "m-other", BytesRead: 1})
	if bs := f.r.Boots(Filter{MAC: macB}); len(bs) != 0 {
		t.Fatalf("a session of a machine with no boot must not create one: %+v", bs)
	}
}

// TestOfferRecorded: the boot record says what each reply offered.
func TestOfferRecorded(t *testing.T) {
	f := newFake(t, Config{})
	f.r.DHCPPacket(macA, dhcpv4.MessageTypeDiscover, uefi)
	f.r.DHCPReply(dhcp.Reply{MAC: macA, Request: dhcpv4.MessageTypeDiscover, Type: dhcpv4.MessageTypeOffer,
		Addr: net.IPv4(10, 0, 0, 10), BootFile: "ipxe.efi", Took: time.Millisecond})
	f.r.DHCPReply(dhcp.Reply{MAC: macB, Request: dhcpv4.MessageTypeDiscover, Type: dhcpv4.MessageTypeOffer,
		Addr: net.IPv4zero, Took: time.Millisecond}) // no open boot: nothing recorded
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 || len(bs[0].DHCP) != 2 {
		t.Fatalf("boots %+v", bs)
	}
	got := bs[0].DHCP[1]
	if got.Type != "OFFER" || got.Addr != "10.0.0.10" || got.BootFile != "ipxe.efi" {
		t.Fatalf("reply exchange %+v, want OFFER of 10.0.0.10 with ipxe.efi", got)
	}
	if bs := f.r.Boots(Filter{MAC: macB}); len(bs) != 0 {
		t.Fatalf("a reply without an open boot started one: %+v", bs)
	}
}

// TestPathRecorded: the boot record names each firmware path once, in
// the order the machine took them, and an OS's DHCP adds none.
func TestPathRecorded(t *testing.T) {
	f := newFake(t, Config{})
	httpFW := pxe.Client{HTTPBoot: true, Arch: pxe.ArchEFIx64HTTP, HasArch: true}
	f.dora(macA, httpFW)
	f.r.DHCPReply(dhcp.Reply{MAC: macA, Request: dhcpv4.MessageTypeDiscover, Type: dhcpv4.MessageTypeOffer,
		Addr: net.IPv4(10, 0, 0, 10), BootFile: "http://10.0.0.1:8080/files/ipxe.efi", VendorClass: "HTTPClient"})
	f.dora(macA, ipxe)
	f.dora(macA, linux)
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 {
		t.Fatalf("boots %+v, want one", bs)
	}
	if got := strings.Join(bs[0].Path, " "); got != "HTTPv4 iPXE" {
		t.Errorf("path %q, want \"HTTPv4 iPXE\"", got)
	}
	var vendor string
	for _, x := range bs[0].DHCP {
		if x.Type == "OFFER" {
			vendor = x.VendorClass
		}
	}
	if vendor != "HTTPClient" {
		t.Errorf("OFFER recorded with vendor class %q, want HTTPClient", vendor)
	}
	f.dora(macB, uefi)
	if bs := f.r.Boots(Filter{MAC: macB}); len(bs) != 1 || strings.Join(bs[0].Path, " ") != "PXEv4" {
		t.Errorf("UEFI PXE boot %+v, want path PXEv4", bs)
	}
}

// TestGrubMilestones: the signed chain's steps extend the path, and a
// failed- milestone ends the boot as failed, saying where it stopped.
func TestGrubMilestones(t *testing.T) {
	f := newFake(t, Config{})
	f.dora(macA, uefi)
	f.r.Milestone(macA, httpboot.MilestoneGrubConfig, "")
	f.r.Milestone(macA, grub.MilestoneSecureBootOn, "")
	f.r.Milestone(macA, grub.MilestoneKernelFailed, "")
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 {
		t.Fatalf("boots %+v, want one", bs)
	}
	b := bs[0]
	if got := strings.Join(b.Path, ","); got != "PXEv4,grub,Secure Boot on" {
		t.Errorf("path %q, want PXEv4,grub,Secure Boot on", got)
	}
	if b.State != StateFailed || !strings.Contains(b.Reason, "kernel") {
		t.Errorf("boot is %s (%q), want failed at the kernel", b.State, b.Reason)
	}
	f.dora(macB, uefi)
	f.r.Milestone(macB, "failed-mount", "")
	if bs := f.r.Boots(Filter{MAC: macB}); len(bs) != 1 || bs[0].State != StateFailed || !strings.Contains(bs[0].Reason, "mount failed") {
		t.Errorf("a client's own failed- milestone: %+v, want failed, saying mount failed", bs)
	}
}

// TestParseNeighbour: an RTM_NEWNEIGH body as the kernel sends it for an
// IPv6 neighbour: ndmsg, NDA_DST, NDA_LLADDR (padded), NDA_CACHEINFO.
func TestParseNeighbour(t *testing.T) {
	ip := net.ParseIP("fd00:213::100")
	b := make([]byte, 12)
	attr := func(typ uint16, v []byte) {
		n := 4 + len(v)
		h := make([]byte, 4)
		binary.NativeEndian.PutUint16(h, uint16(n))
		binary.NativeEndian.PutUint16(h[2:], typ)
		b = append(append(b, h...), v...)
		b = append(b, make([]byte, (n+3)&^3-n)...)
	}
	attr(1, ip)                                      // NDA_DST
	attr(2, []byte{0x52, 0x54, 0, 0xe2, 0xe0, 0x60}) // NDA_LLADDR
	attr(3, make([]byte, 16))                        // NDA_CACHEINFO
	dst, mac := parseNeighbour(b)
	if !dst.Equal(ip) || mac.String() != "52:54:00:e2:e0:60" {
		t.Errorf("parseNeighbour = %v %v, want %v 52:54:00:e2:e0:60", dst, mac, ip)
	}
	if dst, mac := parseNeighbour(b[:20]); dst != nil || mac != nil {
		t.Errorf("a truncated attribute gave %v %v", dst, mac)
	}
}

// TestBootClock: the DoneURL's answer is the time since the boot's first
// DHCP packet, whatever the firmware, iPXE and the OS sent between. A
// call with no boot open has none, an OS renewing its lease opens no
// boot, and a boot left open past StaleAfter gives way to the next.
func TestBootClock(t *testing.T) {
	f := newFake(t, Config{})
	if took, ok := f.done(macA); ok {
		t.Fatalf("the DoneURL with no boot open: took %v, want no duration", took)
	}
	f.dora(macA, uefi) // 0-1
	f.step(9 * time.Second)
	f.dora(macA, ipxe) // 10-11
	f.step(19 * time.Second)
	f.dora(macA, linux) // 30-31
	f.step(4 * time.Second)
	if took, ok := f.done(macA); !ok || took != 35*time.Second {
		t.Fatalf("boot complete: took %v, %v; want 35s", took, ok)
	}
	if took, ok := f.done(macA); ok {
		t.Fatalf("a second DoneURL call: took %v, want no duration", took)
	}
	f.step(time.Minute)
	f.dora(macA, linux) // the OS renews its lease
	if took, ok := f.done(macA); ok {
		t.Fatalf("the DoneURL after a lease renewal: took %v, want no duration", took)
	}
	f.dora(macA, uefi) // the next boot hangs
	f.step(time.Hour + time.Second)
	f.dora(macA, uefi) // and the one after starts here
	f.step(2 * time.Second)
	if took, ok := f.done(macA); !ok || took != 3*time.Second {
		t.Fatalf("after a stale boot: took %v, %v; want 3s", took, ok)
	}
	states := ""
	for _, b := range f.r.Boots(Filter{MAC: macA}) {
		states += b.State + " "
	}
	if states != "complete failed complete " {
		t.Fatalf("boots newest first: %q, want complete failed complete", states)
	}
}
