package nbd

import (
	"fmt"
	"math"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// values is one field of the runs of case c and key k that worked.
func (r results) values(c, k string, field func(sample) float64) []float64 {
	var xs []float64
	for _, s := range r.samples {
		if s.Case == c && s.Key == k && !math.IsNaN(s.Value) {
			xs = append(xs, field(s))
		}
	}
	return xs
}

func value(s sample) float64     { return s.Value }
func serverCPU(s sample) float64 { return s.ServerCPU }
func clientCPU(s sample) float64 { return s.ClientCPU }
func diskMiB(s sample) float64   { return s.DiskMiB }

// median of a field over the runs that worked; NaN when none did.
func (r results) median(c, k string, field func(sample) float64) float64 {
	return harness.Median(r.values(c, k, field))
}

// runs lists every run's figure in the order they ran, failures included.
func (r results) runs(c, k string) string {
	var out []string
	for _, s := range r.samples {
		if s.Case == c && s.Key == k {
			if math.IsNaN(s.Value) {
				out = append(out, "failed")
			} else {
				out = append(out, fmt.Sprintf("%.0f", s.Value))
			}
		}
	}
	return strings.Join(out, ", ")
}

// bestPeer is the peer with the highest median in case c among keys; v is
// 0 and key "" when no peer worked.
func (r results) bestPeer(c string, keys []string) (v float64, key string) {
	for _, k := range keys {
		if isBootfleet(k) {
			continue
		}
		if m := r.median(c, k, value); m > v {
			v, key = m, k
		}
	}
	return v, key
}

// versus compares key with peer run by run: runs with the same round label
// are seconds apart, so their ratio moves less with the machine's load than
// the ratio of the two medians.
func (r results) versus(c, key, peer string) harness.Versus {
	theirs := map[string]float64{}
	for _, s := range r.samples {
		if s.Case == c && s.Key == peer {
			theirs[s.Round] = s.Value
		}
	}
	var pairs [][2]float64
	for _, s := range r.samples {
		if y, ok := theirs[s.Round]; ok && s.Case == c && s.Key == key {
			pairs = append(pairs, [2]float64{s.Value, y})
		}
	}
	return harness.Compare(pairs)
}

// spread is the largest ratio of the fastest to the slowest run of one
// server in one case, ceilings left out: how noisy the run was.
func (r results) spread() float64 {
	type row struct{ c, k string }
	lo, hi := map[row]float64{}, map[row]float64{}
	for _, s := range r.samples {
		if math.IsNaN(s.Value) || strings.HasPrefix(s.Key, "ceil") {
			continue
		}
		x := row{s.Case, s.Key}
		if v, ok := lo[x]; !ok || s.Value < v {
			lo[x] = s.Value
		}
		hi[x] = max(hi[x], s.Value)
	}
	m := 0.0
	for x, l := range lo {
		if l > 0 {
			m = max(m, hi[x]/l)
		}
	}
	return m
}
