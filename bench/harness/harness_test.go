package harness

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedianPercentile(t *testing.T) {
	for _, tc := range []struct {
		name        string
		xs          []float64
		median, p99 float64
	}{
		{"odd", []float64{3, 1, 2}, 2, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5, 4},
		{"one", []float64{7}, 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Median(tc.xs); got != tc.median {
				t.Errorf("Median = %v, want %v", got, tc.median)
			}
			if got := Percentile(tc.xs, 99); got != tc.p99 {
				t.Errorf("Percentile 99 = %v, want %v", got, tc.p99)
			}
		})
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty input must give NaN")
	}
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	if got := Percentile(xs, 99); got != 198 {
		t.Errorf("p99 of 1..200 = %v, want 198 (nearest rank)", got)
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pairs [][2]float64
		want  Versus
	}{
		// Same figures as scripts/pairs.awk gave: 5 of 5 wins is p = 0.0625.
		{"five wins", [][2]float64{{2, 1}, {3, 1}, {4, 2}, {5, 4}, {6, 5}}, Versus{Ratio: 2, Wins: 5, N: 5, P: 0.0625}},
		{"tie", [][2]float64{{1, 2}, {2, 1}}, Versus{Ratio: 1.25, Wins: 1, N: 2, P: 1}},
		{"failed rounds skipped", [][2]float64{{math.NaN(), 1}, {1, 0}, {3, 1}}, Versus{Ratio: 3, Wins: 1, N: 1, P: 1}},
		{"none", nil, Versus{Ratio: math.NaN(), P: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.pairs)
			same := got.Ratio == tc.want.Ratio || math.IsNaN(got.Ratio) && math.IsNaN(tc.want.Ratio)
			if !same || got.Wins != tc.want.Wins || got.N != tc.want.N || math.Abs(got.P-tc.want.P) > 1e-9 {
				t.Errorf("Compare = %+v, want %+v", got, tc.want)
			}
		})
	}
	if p := SignTestP(12, 12); math.Abs(p-2/4096.0) > 1e-12 {
		t.Errorf("SignTestP(12, 12) = %v, want 2/4096", p)
	}
}

func TestRotate(t *testing.T) {
	got := strings.Join(Rotate([]string{"a", "b", "c"}, 4), "")
	if got != "bca" {
		t.Errorf("Rotate by 4 = %q, want bca", got)
	}
}

func TestParseRateAndShellJoin(t *testing.T) {
	for in, want := range map[string]float64{"1gbit": 1e9, "100mbit": 1e8, "2.5Gbit": 2.5e9} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1gbps", "-1gbit", "gbit"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q): want an error", bad)
		}
	}
	if got := ShellJoin([]string{"atftp", "--option", "blksize 1456", "--pid-file=", "it's", ""}); got != `atftp --option 'blksize 1456' --pid-file= 'it'\''s' ''` {
		t.Errorf("ShellJoin = %s", got)
	}
}

func TestRenderIndex(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "BENCHMARKS-x.md"), []byte("# X against Y\n\nWritten by `x` on 2026-11-26T02:00:00Z.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := RenderIndex(dir, []Report{
		{File: "BENCHMARKS-x.md", What: "x", Command: "make bench-x"},
		{File: "BENCHMARKS-y.md", What: "y", Command: "make bench-y"},
	})
	for _, want := range []string{
		"| [X against Y](BENCHMARKS-x.md) | x | 2026-11-26 | `make bench-x` |",
		"| [BENCHMARKS-y.md](BENCHMARKS-y.md) | y | not written yet | `make bench-y` |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("index lacks %q:\n%s", want, got)
		}
	}
}
