package nbd

import (
	"math"
	"strings"
	"testing"
)

// TestParseLayersFlags: -layers takes at most one build, defaults to
// bin/bootfleet, and -report needs it.
func TestParseLayersFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // error; "" for none
		bin  string
	}{
		{[]string{"-layers", "3"}, "", "bin/bootfleet"},
		{[]string{"-layers", "3", "new=/tmp/bf"}, "", "/tmp/bf"},
		{[]string{"-layers", "3", "a=/x", "b=/y"}, "want at most one NAME=BINARY", ""},
		{[]string{"-report", "BENCHMARKS-nbd.md", "a=/x"}, "-report writes only the layered A/B", ""},
		{[]string{"-layers", "-1"}, "-layers must be at least 1", ""},
	} {
		o, err := parseABFlags(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		case tc.want == "" && (len(o.variants) != 1 || o.variants[0].bin != tc.bin):
			t.Errorf("%q: variants %+v, want one running %s", tc.args, o.variants, tc.bin)
		}
	}
}

// TestLayersSummary: medians, CPU per unit and deep over flat round by
// round, a failed run shown and left out.
func TestLayersSummary(t *testing.T) {
	nan := layerRun{math.NaN(), math.NaN(), math.NaN()}
	got := layersSummary(map[string][]layerRun{
		"seq/flat": {{400, 0.2, 0.5}, {300, 0.2, 0.5}, {200, 0.2, 0.5}},
		"seq/deep": {{440, 0.22, 0.5}, {330, 0.2, 0.5}, nan},
		"rr/flat":  {{10000, 0.5, 50000}, {10000, 0.5, 50000}},
		"rr/deep":  {{9000, 0.5, 45000}, {11000, 0.5, 55000}},
	})
	for _, want := range []string{
		"  flat median 300 MB/s, server CPU 0.4 s/GB  runs: 400 300 200\n",
		"  deep median 385 MB/s, server CPU 0.42 s/GB  runs: 440 330 NaN\n",
		"MB/s median 1.100, ahead in 2 of 2 (sign test p = 0.50); server CPU per unit median 1.050, more in 1 of 2",
		"  flat median 10000 IOPS, server CPU 10 µs/op",
		"IOPS median 1.000, ahead in 1 of 2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
