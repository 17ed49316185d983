package transfer

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/bootfleet/bootfleet/bench/harness"
)

func TestTFTPLimit(t *testing.T) {
	for _, tc := range []struct {
		name          string
		blksize, want int
	}{
		{"blksize 1456 fits a 1500 MTU", 1456, 1526},
		{"blksize 1468 is the largest unfragmented", 1468, 1538},
		{"blksize 8192 is six fragments", 8192, 5*1538 + 862},
		{"empty last block pads to the minimum frame", 0, 84},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tftpBlockWire(tc.blksize, 1500); got != tc.want {
				t.Errorf("tftpBlockWire(%d, 1500) = %d, want %d", tc.blksize, got, tc.want)
			}
		})
	}
	// The targets' reference figure: 201 MiB at 119.3 MB/s is 1.77 s.
	got := tftpLimitSeconds(201<<20, 1456, 1500, 1e9)
	if math.Abs(got-1.767) > 0.001 {
		t.Errorf("201 MiB at blksize 1456 over 1 Gbit/s: got %.4f s, want 1.767 s", got)
	}
	if got := tcpLimitSeconds(1448*1000, 1500, 1e9); math.Abs(got-1000*1538*8/1e9) > 1e-9 {
		t.Errorf("tcpLimitSeconds: got %v", got)
	}
}

func TestParseOACK(t *testing.T) {
	for _, tc := range []struct {
		name, trace, raw string
		want             map[string]int
		err              bool
	}{
		{"blksize only, atftp backspaces", "sent RRQ <...>\nreceived OACK <blksize: 1456, \b\b>\nsent ACK", "blksize: 1456",
			map[string]int{"blksize": 1456}, false},
		{"windowsize granted", "received OACK <windowsize: 16, blksize: 1456, >", "windowsize: 16, blksize: 1456",
			map[string]int{"windowsize": 16, "blksize": 1456}, false},
		{"no OACK", "received DATA <block: 1, size 512>", "", nil, true},
		{"garbage value", "received OACK <blksize: big, >", "blksize: big, ", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, raw, err := parseOACK(tc.trace)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if raw != tc.raw {
				t.Errorf("raw = %q, want %q", raw, tc.raw)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %d, want %d", k, got[k], v)
				}
			}
		})
	}
}

// TestReport renders a fixed set of results and compares the report with
// testdata/report.golden.md; UPDATE_TESTDATA=1 rewrites it.
func TestReport(t *testing.T) {
	r := fixture()
	got := render(r, "bench/results", map[string]string{"case1": "case1.png", "storm": "storm.png"})
	path := filepath.Join("testdata", "report.golden.md")
	harness.Golden(t, path, got)

	ts := r.targets(r.Clients)
	wantStatus := []string{"met", "met", "met", notMeasured, "not met", notMeasured, notMeasured}
	for i, w := range wantStatus {
		if ts[i].Status != w {
			t.Errorf("target %q: status %q, want %q (%s)", ts[i].Name, ts[i].Status, w, ts[i].Measured)
		}
	}
}

func fixture() *Results {
	lim := tftpLimitSeconds(201<<20, 1456, 1500, 1e9)
	one := func(server, label string, secs ...float64) *Measurement {
		m := &Measurement{Case: 1, Topo: "shaped", Label: label, Server: server, Clients: 1, Bytes: 201 << 20, LimitSec: lim,
			ClientCmd: "atftp " + label}
		for _, s := range secs {
			m.Runs = append(m.Runs, Run{Sec: s, OK: true, ServerCPU: 0.5})
		}
		return m
	}
	storm := &Measurement{Case: 3, Topo: "shaped", Label: "lockstep", Server: "bootfleet", Clients: 4, Bytes: 4 * (41 << 20),
		LimitSec: 4 * 0.36, Runs: []Run{{Sec: 2, OK: false, TimedOut: 1, Err: "timeout", PerClient: []float64{1, 1.5, 1.8, 2}, Busy: 0.95, ClientCPU: 2, ServerCPU: 0.5}}}
	failed := one("atftpd", cfgLabel(8192, 64))
	failed.Runs = []Run{{Sec: 30, TimedOut: 1, Err: "big.img: not finished at the deadline"}}
	failed.Note = "timed out after 30s; not repeated"
	same := one("dnsmasq", cfgLabel(1456, 64), 3.4)
	same.SameAs = cfgLabel(1456, 1)
	return &Results{
		Started: "2026-01-01T00:00:00Z", Seconds: 600, Complete: true,
		Host: []string{"2 CPUs"}, Settings: []string{"runs: 3"}, Rate: "1gbit", RateBps: 1e9, Clients: 4,
		Shaping:  []string{"tc qdisc replace dev x root tbf rate 1gbit"},
		LossRule: harness.LossRule(serverAddr, 0),
		Servers: []ServerInfo{{Name: "bootfleet", Version: "test", Cmds: []string{"bootfleet serve"}},
			{Name: "dnsmasq", Version: "2.90"}, {Name: "atftpd", Skipped: ""}},
		Probes: []Probe{{Server: "dnsmasq", Blksize: 1456, Windowsize: 64, OACK: "blksize: 1456", GotBlksize: 1456}},
		Meas: []*Measurement{
			one("bootfleet", cfgLabel(1456, 1), 2.0, 2.1, 1.9),
			one("dnsmasq", cfgLabel(1456, 1), 3.4, 3.5, 3.3),
			one("bootfleet", cfgLabel(1456, 64), 1.80, 1.79, 1.85),
			same,
			one("bootfleet", cfgLabel(8192, 64), 1.81),
			failed,
			storm,
		},
		Notes: []string{"a note"},
	}
}
