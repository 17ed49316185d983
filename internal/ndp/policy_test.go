package ndp

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ours     = netip.MustParseAddr("fe80::1")
	router   = netip.MustParseAddr("fe80::254")
	clientA  = netip.MustParseAddr("fe80::5054:ff:fee2:e002")
	clientB  = netip.MustParseAddr("fe80::5054:ff:fee2:e003")
	noSource = netip.IPv6Unspecified()
)

// step is one event at an offset from t0: an advertisement heard from ra,
// or a solicitation from rs whose answer is decided Delay later.
type step struct {
	at     time.Duration
	ra, rs netip.Addr
	want   bool // for rs: answered
}

func TestPolicy(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	tests := []struct {
		name  string
		cfg   PolicyConfig
		steps []step
	}{
		{name: "answers after the delay on a router-less link", steps: []step{
			{at: 0, rs: clientA, want: true}}},
		{name: "silent when another router advertised before", steps: []step{
			{at: 0, ra: router},
			{at: 10 * s, rs: clientA, want: false}}},
		{name: "silent when another router answers within the delay", steps: []step{
			{at: 0, rs: clientA, want: false},
			{at: 400 * ms, ra: router}}},
		{name: "our own advertisements do not count as a router", steps: []step{
			{at: 0, ra: ours},
			{at: 10 * ms, rs: clientA, want: true}}},
		{name: "our own solicitations are not answered", steps: []step{
			{at: 0, rs: ours, want: false}}},
		{name: "router heard 29 minutes ago still silences", steps: []step{
			{at: 0, ra: router},
			{at: 29 * time.Minute, rs: clientA, want: false}}},
		{name: "router gone for 30 minutes: answering again", steps: []step{
			{at: 0, ra: router},
			{at: 30 * time.Minute, rs: clientA, want: true}}},
		{name: "per-solicitor rate limit, with a delay shorter than it", cfg: PolicyConfig{Delay: 100 * ms}, steps: []step{
			{at: 0, rs: clientA, want: true},
			{at: 200 * ms, rs: clientA, want: false},
			{at: 600 * ms, rs: clientA, want: true}}},
		{name: "another solicitor is not limited by the first", steps: []step{
			{at: 0, rs: clientA, want: true},
			{at: 100 * ms, rs: clientB, want: true}}},
		{name: "retransmission while an answer is pending gets one answer", steps: []step{
			{at: 0, rs: clientA, want: true},
			{at: 250 * ms, rs: clientA, want: false}}},
		{name: "unspecified source: multicast limit of 3 s", steps: []step{
			{at: 0, rs: noSource, want: true},
			{at: 1500 * ms, rs: noSource, want: false},
			{at: 3 * s, rs: noSource, want: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Own = func(a netip.Addr) bool { return a == ours }
			p := NewPolicy(cfg)
			delay := p.cfg.Delay
			// Events in time order: the steps, and each Due one Delay after
			// an accepted solicitation.
			type due struct {
				at   time.Duration
				src  netip.Addr
				want bool
			}
			var dues []due
			runDues := func(until time.Duration) {
				for len(dues) > 0 && dues[0].at <= until {
					d := dues[0]
					dues = dues[1:]
					got, why := p.Due(d.src, t0.Add(d.at))
					if got != d.want {
						t.Errorf("answer to %v at %v: %v (%s), want %v", d.src, d.at, got, why, d.want)
					}
				}
			}
			for _, st := range tt.steps {
				runDues(st.at)
				now := t0.Add(st.at)
				if st.ra.IsValid() {
					p.HeardAdvertisement(st.ra, now)
					continue
				}
				at, ok, why := p.Solicited(st.rs, now)
				if !ok {
					if st.want {
						t.Errorf("solicitation from %v at %v refused (%s), want an answer", st.rs, st.at, why)
					}
					continue
				}
				if got := at.Sub(now); got != delay {
					t.Errorf("answer scheduled after %v, want %v", got, delay)
				}
				dues = append(dues, due{at: st.at + delay, src: st.rs, want: st.want})
			}
			runDues(time.Hour * 24)
		})
	}
}

func TestPolicyInterfaceRateLimit(t *testing.T) {
	p := NewPolicy(PolicyConfig{MaxPerSecond: 3})
	answered := 0
	for i := range 10 {
		src := netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(i + 1)})
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if _, ok, why := p.Solicited(src, now); !ok {
			t.Fatalf("solicitation %d refused: %s", i, why)
		}
		if ok, _ := p.Due(src, now.Add(DefaultDelay)); ok {
			answered++
		}
	}
	if answered != 3 {
		t.Errorf("answered %d of 10 solicitations within one second, want 3", answered)
	}
	// The next second has a fresh budget.
	src := netip.MustParseAddr("fe80::99")
	p.Solicited(src, t0.Add(2*time.Second))
	if ok, why := p.Due(src, t0.Add(3*time.Second)); !ok {
		t.Errorf("next second refused: %s", why)
	}
}

// TestPolicyLogsTransitions: one Info line when we start answering and one
// when a router silences us (naming it), not one per packet.
func TestPolicyLogsTransitions(t *testing.T) {
	var buf bytes.Buffer
	p := NewPolicy(PolicyConfig{Interface: "br0", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Second)
		p.Solicited(clientA, now)
		p.Due(clientA, now.Add(DefaultDelay))
	}
	p.HeardAdvertisement(router, t0.Add(10*time.Second))
	p.HeardAdvertisement(router, t0.Add(20*time.Second))
	out := buf.String()
	if n := strings.Count(out, "no router on this link"); n != 1 {
		t.Errorf("%d 'no router' lines, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "another router advertises"); n != 1 || !strings.Contains(out, "router=fe80::254") {
		t.Errorf("want one 'another router' line naming fe80::254:\n%s", out)
	}
}
