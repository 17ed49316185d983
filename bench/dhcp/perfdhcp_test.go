package dhcp

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/bench/harness"
)

func TestParsePerfdhcp(t *testing.T) {
	f, err := os.Open("testdata/perfdhcp-kea.txt") // perfdhcp 2.2.0 against Kea, timestamps trimmed to 4 per stage
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parsePerfdhcp(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"rate", r.Rate, 2819.16},
		{"DO sent", float64(r.DO.Sent), 14999},
		{"DO received", float64(r.DO.Received), 14283},
		{"DO drops", float64(r.DO.Drops), 716},
		{"RA sent", float64(r.RA.Sent), 14283},
		{"RA received", float64(r.RA.Received), 14100},
		{"DO timestamps", float64(len(r.DO.Latencies)), 4},
		{"RA timestamps", float64(len(r.RA.Latencies)), 4},
		{"DO p50 ms", harness.Percentile(r.DO.Latencies, 50), 1.112},
		{"RA p99 ms", harness.Percentile(r.RA.Latencies, 99), 0.521},
		{"drop %", r.DropPct(), 100 * float64(14999-14100) / 14999},
	} {
		t.Run(c.name, func(t *testing.T) {
			if math.Abs(c.got-c.want) > 1e-6 {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func TestParsePerfdhcpRejectsOutputWithoutRate(t *testing.T) {
	for _, in := range []string{"", "Error running perfdhcp: no such interface\n", "Rate: fast\n"} {
		if _, err := parsePerfdhcp(strings.NewReader(in)); err == nil {
			t.Errorf("parse %q: no error, want one", in)
		}
	}
}

func TestMedianAndPercentile(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"median odd", harness.Median([]float64{3, 1, 2}), 2},
		{"median even", harness.Median([]float64{4, 1, 3, 2}), 2.5},
		{"p50", harness.Percentile([]float64{5, 1, 4, 2, 3}, 50), 3},
		{"p99 of 5", harness.Percentile([]float64{5, 1, 4, 2, 3}, 99), 5},
		{"p0", harness.Percentile([]float64{5, 1}, 0), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
	if !math.IsNaN(harness.Median(nil)) || !math.IsNaN(harness.Percentile(nil, 50)) {
		t.Error("empty input: want NaN")
	}
}
