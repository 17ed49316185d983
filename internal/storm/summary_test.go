package storm

import (
	"bytes"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		d    []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{3}, 99, 3},
		{"p50 of four is the second", []float64{4, 1, 3, 2}, 50, 2},
		{"p99 of 100 is the 99th", seq(100), 99, 99},
		{"p99 of 200 is the 198th", seq(200), 99, 198},
		{"p100 is the max", seq(7), 100, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.d, tt.p); got != tt.want {
				t.Fatalf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func seq(n int) []float64 {
	d := make([]float64, n)
	for i := range d {
		d[n-1-i] = float64(i + 1) // reversed, so the sort matters
	}
	return d
}

func TestSummarize(t *testing.T) {
	ok := func(on, boot float64, bytes int64) Machine {
		return Machine{Result: "ok", PowerOn: on, Boot: boot, Phases: Phases{
			DHCP: &Phase{Duration: 0.1, Bytes: 600}, HTTP: &Phase{Duration: boot - 0.1, Bytes: bytes - 600}}}
	}
	ms := []Machine{
		ok(0, 2, 1e6), ok(1, 3, 1e6),
		{Result: "tftp: no answer", PowerOn: 0.5, Boot: 30, Phases: Phases{DHCP: &Phase{Duration: 0.2, Bytes: 600}, TFTP: &Phase{Duration: 29.8}}},
		{Result: "tftp: no answer", PowerOn: 0.6, Boot: 1},
		{Result: "http: interrupted", PowerOn: 2, Boot: 1},
		{Result: "dhcp: interrupted before power-on"},
	}
	s := summarize(ms, 1e9)
	if s.Booted != 2 || s.Failed != 2 || s.Pending != 2 || s.Failures["tftp: no answer"] != 2 {
		t.Fatalf("booted %d failed %d pending %d failures %v: want 2, 2, 2 and both tftp failures", s.Booted, s.Failed, s.Pending, s.Failures)
	}
	// The wall runs from the first power-on (0) to the last end (0.5+30).
	if s.WallSeconds != 30.5 || s.Bytes != 2e6+600 {
		t.Fatalf("wall %v bytes %d, want 30.5 and %d", s.WallSeconds, s.Bytes, int64(2e6+600))
	}
	if want := float64(s.Bytes) * 8 / 30.5 / 1e9; s.Utilisation != want {
		t.Fatalf("utilisation %v, want %v", s.Utilisation, want)
	}
	if b := s.Phases["boot"]; b.Count != 2 || b.P50 != 2 || b.Max != 3 {
		t.Fatalf("boot stats %+v: want the 2 booted machines, p50 2, max 3", b)
	}
	if d := s.Phases["dhcp"]; d.Count != 3 || d.Bytes != 1800 {
		t.Fatalf("dhcp stats %+v: want 3 machines, 1800 bytes", d)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, &Report{Interface: "eth1", Firmware: FirmwareUEFI, Clients: 6, Summary: s}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"6 uefi machines on eth1: 2 booted, 2 failed, 2 interrupted", "of the 1000 Mbit/s link", "     2  tftp: no answer"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSummarizeImages: group bytes and unicast bytes are told apart, and
// the fallbacks counted, over machines and images.
func TestSummarizeImages(t *testing.T) {
	kernelByGroup := ImageFetch{Name: "kernel", Via: "mtftp", Bytes: 1000, MulticastBytes: 1000, MTFTP: &MTFTPStats{MulticastBytes: 1000, RRQs: 1}}
	kernelByTFTP := ImageFetch{Name: "kernel", Via: "tftp", Bytes: 1000, MTFTP: &MTFTPStats{RRQs: 3, FellBack: true}}
	kernelByHTTP := ImageFetch{Name: "kernel", Via: "http", Bytes: 1000, Fallbacks: 1, MTFTP: &MTFTPStats{}}
	initrd := ImageFetch{Name: "initrd.img", Via: "http", Bytes: 300}
	ms := []Machine{
		{Result: "ok", Images: []ImageFetch{kernelByGroup, initrd}},
		{Result: "ok", Images: []ImageFetch{kernelByTFTP, initrd}},
		{Result: "ok", Images: []ImageFetch{kernelByHTTP, initrd}},
	}
	s := summarize(ms, 0)
	want := ImageSummary{Fetches: 6, MulticastBytes: 1000, UnicastBytes: 2900, MTFTP: 1, MTFTPFellBack: 1, URLFallbacks: 1}
	if s.Images == nil || *s.Images != want {
		t.Fatalf("images %+v, want %+v", s.Images, want)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, &Report{Clients: 3, Summary: s}); err != nil {
		t.Fatal(err)
	}
	if w := "1 mtftp fell back to TFTP, 1 URLs failed over to the next"; !strings.Contains(out.String(), w) {
		t.Errorf("table lacks %q:\n%s", w, out.String())
	}
}
